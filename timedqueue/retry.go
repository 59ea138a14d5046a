package timedqueue

import (
	"errors"
	"time"

	"github.com/taintkit/taintkit/internal/backoff"
)

// Defaults for the zero fields of a [RetryPolicy].
const (
	DefaultMaxAttempts    = 5 // one attempt and four retries
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
)

// The constants are internal/backoff's, shared with package sharding: a
// conversion of a negative constant to uint fails to compile if they drift.
const _ = uint(DefaultMaxAttempts-backoff.DefaultMaxAttempts) + uint(backoff.DefaultMaxAttempts-DefaultMaxAttempts) +
	uint(DefaultInitialBackoff-backoff.DefaultInitialBackoff) + uint(backoff.DefaultInitialBackoff-DefaultInitialBackoff) +
	uint(DefaultMaxBackoff-backoff.DefaultMaxBackoff) + uint(backoff.DefaultMaxBackoff-DefaultMaxBackoff) +
	uint(UnlimitedAttempts-backoff.UnlimitedAttempts) + uint(backoff.UnlimitedAttempts-UnlimitedAttempts)

// UnlimitedAttempts as [RetryPolicy.MaxAttempts] retries a failed schedule
// until an attempt succeeds, fails with a [Permanent] error, or the caller
// ends it ([TimedWorkerQueue.CancelWork], an UpdateWork to another time,
// Shutdown). It is for work that must not be given up while it is wanted:
// such a schedule never reaches the failure hook, and one that always fails
// costs an attempt every MaxBackoff, and its memory, until it is cancelled.
const UnlimitedAttempts = -1

// RetryPolicy says when a failed attempt is tried again: after
// [RetryPolicy.Backoff], on the clock from the attempt's return, up to
// MaxAttempts attempts in all ([UnlimitedAttempts]: no limit). Zero fields
// take the Default constants (a MaxBackoff set alone below
// DefaultInitialBackoff makes every wait MaxBackoff; an InitialBackoff set
// alone above DefaultMaxBackoff, every wait InitialBackoff). New rejects
// negative fields but UnlimitedAttempts, and MaxBackoff below InitialBackoff
// when both are set.
type RetryPolicy struct {
	MaxAttempts    int           // counts the first attempt: 1 means no retry
	InitialBackoff time.Duration // the wait after the first failure
	MaxBackoff     time.Duration // caps every wait
}

// Backoff returns the wait after the n-th failed attempt (n < 1 counts as 1):
// InitialBackoff doubled n-1 times, capped at MaxBackoff, zero fields taking
// the defaults (the default policy's if New would reject p). It is for work
// counting its own attempts and waiting with [RetryAt].
func (p RetryPolicy) Backoff(n int) time.Duration {
	return backoff.Policy(p).Backoff(n)
}

// normalize validates p and fills in its zero fields.
func (p RetryPolicy) normalize() (RetryPolicy, error) {
	b := backoff.Policy(p)
	if err := b.Check("timedqueue", "RetryPolicy"); err != nil {
		return p, err
	}
	return RetryPolicy(b.WithDefaults()), nil
}

// backoff returns the wait after the failed-th failed attempt (failed ≥ 1).
// p must be normalized.
func (p RetryPolicy) backoff(failed int) time.Duration {
	return backoff.Policy(p).Wait(failed)
}

// exhausted reports whether failed attempts leave none to make. p must be
// normalized.
func (p RetryPolicy) exhausted(failed int) bool { return backoff.Policy(p).Exhausted(failed) }

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
// until at, as after an [AdmitFunc]'s refusal: for a server that refused for
// now (a disruption budget, say). reason, which may be nil, is logged.
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
