package sharding

import (
	"time"

	"github.com/taintkit/taintkit/internal/backoff"
)

// Defaults for the zero fields of a [RetryPolicy].
const (
	DefaultMaxAttempts    = 5 // one attempt and four retries
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
)

// The defaults are internal/backoff's, shared with package timedqueue: a
// conversion of a negative constant to uint fails to compile if they drift.
const _ = uint(DefaultMaxAttempts-backoff.DefaultMaxAttempts) + uint(backoff.DefaultMaxAttempts-DefaultMaxAttempts) +
	uint(DefaultInitialBackoff-backoff.DefaultInitialBackoff) + uint(backoff.DefaultInitialBackoff-DefaultInitialBackoff) +
	uint(DefaultMaxBackoff-backoff.DefaultMaxBackoff) + uint(backoff.DefaultMaxBackoff-DefaultMaxBackoff)

// RetryPolicy says when a failed attempt is tried again: after the wait
// [RetryPolicy.Backoff] gives, on the clock from the attempt's return, up to
// MaxAttempts attempts in all. Zero fields take the Default constants, but a MaxBackoff set alone below
// DefaultInitialBackoff makes every wait MaxBackoff, and an InitialBackoff set
// alone above DefaultMaxBackoff makes every wait InitialBackoff. New rejects
// negative fields, and a MaxBackoff below InitialBackoff when both are set.
type RetryPolicy struct {
	MaxAttempts    int           // counts the first attempt: 1 means no retry
	InitialBackoff time.Duration // the wait after the first failure
	MaxBackoff     time.Duration // caps every wait
}

// Backoff returns the wait after the n-th failed attempt (n < 1 counts as
// 1): InitialBackoff doubled n-1 times, capped at MaxBackoff, zero fields
// taking the defaults; the default policy's if New would reject p.
func (p RetryPolicy) Backoff(n int) time.Duration {
	return backoff.Policy(p).Backoff(n)
}

// validate reports the first invalid field of p.
func (p RetryPolicy) validate() error { return backoff.Policy(p).Check("sharding", "Retry") }

// withDefaults returns p with its zero fields replaced by the defaults.
// p must be valid.
func (p RetryPolicy) withDefaults() RetryPolicy { return RetryPolicy(backoff.Policy(p).WithDefaults()) }

// backoff returns the wait after the failures-th failed attempt (1-based).
// p must have its defaults applied.
func (p RetryPolicy) backoff(failures int) time.Duration { return backoff.Policy(p).Wait(failures) }
