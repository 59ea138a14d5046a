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
	uint(DefaultMaxBackoff-backoff.DefaultMaxBackoff) + uint(backoff.DefaultMaxBackoff-DefaultMaxBackoff) +
	uint(UnlimitedAttempts-backoff.UnlimitedAttempts) + uint(backoff.UnlimitedAttempts-UnlimitedAttempts)

// UnlimitedAttempts as [RetryPolicy.MaxAttempts] retries a failed item until
// a handler call succeeds or Run stops: such an item is never dropped as
// failed, and one that always fails costs a call every MaxBackoff, and its
// memory, for as long as Run runs. An add of the item while it waits for a
// retry queues it at once, with its attempts reset, as with any policy.
const UnlimitedAttempts = -1

// RetryPolicy says when a failed attempt is tried again: after the wait
// [RetryPolicy.Backoff] gives, on the clock from the attempt's return, up to
// MaxAttempts attempts in all ([UnlimitedAttempts]: no limit). Zero fields
// take the Default constants, but a MaxBackoff set alone below
// DefaultInitialBackoff makes every wait MaxBackoff, and an InitialBackoff set
// alone above DefaultMaxBackoff makes every wait InitialBackoff. New rejects
// negative fields but UnlimitedAttempts, and a MaxBackoff below
// InitialBackoff when both are set.
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

// exhausted reports whether failures leave no attempt to make. p must have
// its defaults applied.
func (p RetryPolicy) exhausted(failures int) bool { return backoff.Policy(p).Exhausted(failures) }
