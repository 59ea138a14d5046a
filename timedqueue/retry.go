package timedqueue

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for the zero fields of a [RetryPolicy].
const (
	DefaultMaxAttempts    = 5 // one attempt and four retries
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
)

// RetryPolicy says how failed attempts are retried: the n-th failure waits
// InitialBackoff·2^(n-1), capped at MaxBackoff, with no jitter, up to
// MaxAttempts attempts (1: no retry). Zero fields take the defaults, but a
// zero backoff never crosses the other one.
type RetryPolicy struct {
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// normalize validates p and fills in its zero fields.
func (p RetryPolicy) normalize() (RetryPolicy, error) {
	switch {
	case p.MaxAttempts < 0:
		return p, fmt.Errorf("timedqueue: RetryPolicy.MaxAttempts must not be negative, got %d", p.MaxAttempts)
	case p.InitialBackoff < 0:
		return p, fmt.Errorf("timedqueue: RetryPolicy.InitialBackoff must not be negative, got %v", p.InitialBackoff)
	case p.MaxBackoff < 0:
		return p, fmt.Errorf("timedqueue: RetryPolicy.MaxBackoff must not be negative, got %v", p.MaxBackoff)
	case p.MaxBackoff != 0 && p.InitialBackoff != 0 && p.MaxBackoff < p.InitialBackoff:
		return p, fmt.Errorf("timedqueue: RetryPolicy.MaxBackoff (%v) must not be less than InitialBackoff (%v)", p.MaxBackoff, p.InitialBackoff)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = DefaultInitialBackoff
		if p.MaxBackoff != 0 {
			// A MaxBackoff alone below the default caps every wait, as in
			// package sharding, rather than failing New.
			p.InitialBackoff = min(p.InitialBackoff, p.MaxBackoff)
		}
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = max(DefaultMaxBackoff, p.InitialBackoff)
	}
	if p.MaxBackoff < p.InitialBackoff {
		return p, fmt.Errorf("timedqueue: RetryPolicy.MaxBackoff (%v) must not be less than InitialBackoff (%v)", p.MaxBackoff, p.InitialBackoff)
	}
	return p, nil
}

// Backoff returns the wait p puts after the n-th failed attempt (n ≥ 1;
// smaller n count as 1), its zero fields taking the defaults:
// InitialBackoff·2^(n-1), capped at MaxBackoff. It is for work that keeps a
// count of its own and waits with [RetryAt], in step with the queue's
// retries. An invalid p (one [New] refuses) waits as the default policy.
func (p RetryPolicy) Backoff(n int) time.Duration {
	q, err := p.normalize()
	if err != nil {
		q, _ = RetryPolicy{}.normalize()
	}
	return q.backoff(max(n, 1))
}

// backoff returns the wait after the failed-th failed attempt (failed ≥ 1).
// p must be normalized.
func (p RetryPolicy) backoff(failed int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < failed && d < p.MaxBackoff; i++ {
		d *= 2 // cannot overflow: d < MaxBackoff ≤ MaxInt64, and we stop once d ≥ MaxBackoff
		if d <= 0 {
			return p.MaxBackoff
		}
	}
	return min(d, p.MaxBackoff)
}

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that the attempt returning it is not retried.
// Permanent(nil) is nil; the result unwraps to err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err or an error it wraps was made by [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAtError is the error of [RetryAt].
type retryAtError struct {
	at     time.Time
	reason error
}

func (e *retryAtError) Error() string {
	if e.reason == nil {
		return "timedqueue: retry at " + e.at.String()
	}
	return "timedqueue: retry at " + e.at.String() + ": " + e.reason.Error()
}

func (e *retryAtError) Unwrap() error { return e.reason }

// RetryAt returns an error that, returned by a work func (as is or wrapped),
// ends the attempt without failing it: the schedule waits, holding no slot,
// and its next attempt starts no earlier than at (at or before now: as soon
// as a slot is free). Nothing else changes: Attempts is not counted, FireAt
// and CreatedAt stay, no hook is called, no failure or retry is counted, and
// the wait does not use up the [RetryPolicy]. It is for work that must wait
// for something other than its own failure: a rate limit's next token, or a
// server that refused for now, not for error (a disruption budget, say).
// reason, which may be nil, is kept for the logs. After Shutdown the schedule
// is dropped and counted as a drop.
func RetryAt(at time.Time, reason error) error {
	return &retryAtError{at: at, reason: reason}
}

// retryAtOf returns the RetryAt error in err's chain, or nil.
func retryAtOf(err error) *retryAtError {
	var r *retryAtError
	if errors.As(err, &r) {
		return r
	}
	return nil
}
