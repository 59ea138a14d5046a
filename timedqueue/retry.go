package timedqueue

import (
	"errors"
	"fmt"
	"time"
)

// Defaults used for the zero fields of a [RetryPolicy].
const (
	// DefaultMaxAttempts is the number of attempts a schedule gets when
	// RetryPolicy.MaxAttempts is zero: one first attempt and four retries.
	DefaultMaxAttempts = 5
	// DefaultInitialBackoff is the wait before the first retry when
	// RetryPolicy.InitialBackoff is zero.
	DefaultInitialBackoff = time.Second
	// DefaultMaxBackoff caps the wait between retries when RetryPolicy.MaxBackoff
	// is zero (raised to InitialBackoff if that is larger).
	DefaultMaxBackoff = time.Minute
)

// RetryPolicy says how failed attempts of a schedule are retried.
//
// After the n-th failed attempt (n = 1, 2, …) the next attempt starts no earlier
// than InitialBackoff·2^(n-1) after the failure, as read from the queue's clock,
// capped at MaxBackoff. There is no jitter. After MaxAttempts attempts in all the
// schedule ends, the key is released and the failure is reported.
//
// The zero RetryPolicy means DefaultMaxAttempts attempts, DefaultInitialBackoff
// and DefaultMaxBackoff; each zero field takes its default on its own.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one schedule, the first included.
	// Zero means DefaultMaxAttempts; 1 means no retry.
	MaxAttempts int
	// InitialBackoff is the wait before the first retry. Zero means
	// DefaultInitialBackoff, or MaxBackoff if that is set and smaller.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait between attempts. Zero means DefaultMaxBackoff,
	// or InitialBackoff if that is larger.
	MaxBackoff time.Duration
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

// Permanent wraps err so that the queue does not retry the attempt that returned
// it: the schedule ends at once and the failure is reported. Permanent(nil)
// returns nil. The result unwraps to err, so errors.Is and errors.As see through it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, was made by [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
