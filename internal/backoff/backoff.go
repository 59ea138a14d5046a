// Package backoff is the retry rule shared by timedqueue.RetryPolicy and
// sharding.RetryPolicy: their validation, the defaults of their zero fields
// and the exponential backoff. Each of those packages declares its own
// RetryPolicy, with the fields of [Policy], and converts it to call here.
package backoff

import (
	"fmt"
	"time"
)

// The defaults of a Policy's zero fields. timedqueue and sharding export the
// same values under the same names, checked when they compile.
const (
	DefaultMaxAttempts    = 5 // one attempt and four retries
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
)

// UnlimitedAttempts as MaxAttempts retries until the attempt succeeds or the
// caller ends it.
const UnlimitedAttempts = -1

// Policy has the fields of the exported RetryPolicy types, so that each
// converts to it.
type Policy struct {
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// Check returns an error naming the first invalid field of p, or nil. pkg
// and name say where the policy is set ("sharding", "Retry"): the error reads
// "sharding: Retry.InitialBackoff must not be negative, got -1s". A valid p
// has no negative field but a MaxAttempts of UnlimitedAttempts and, when
// both backoffs are set, a MaxBackoff no smaller than InitialBackoff. With one backoff zero, p is valid whatever the other:
// WithDefaults resolves the pair.
func (p Policy) Check(pkg, name string) error {
	switch {
	case p.MaxAttempts < 0 && p.MaxAttempts != UnlimitedAttempts:
		return fmt.Errorf("%s: %s.MaxAttempts must not be negative but for UnlimitedAttempts (-1), got %d", pkg, name, p.MaxAttempts)
	case p.InitialBackoff < 0:
		return fmt.Errorf("%s: %s.InitialBackoff must not be negative, got %v", pkg, name, p.InitialBackoff)
	case p.MaxBackoff < 0:
		return fmt.Errorf("%s: %s.MaxBackoff must not be negative, got %v", pkg, name, p.MaxBackoff)
	case p.InitialBackoff != 0 && p.MaxBackoff != 0 && p.MaxBackoff < p.InitialBackoff:
		return fmt.Errorf("%s: %s.MaxBackoff (%v) must not be less than %s.InitialBackoff (%v)",
			pkg, name, p.MaxBackoff, name, p.InitialBackoff)
	}
	return nil
}

// WithDefaults returns p with its zero fields replaced by the defaults. When
// only one backoff is set, the other's default gives way to it: a
// MaxBackoff alone below DefaultInitialBackoff is also the first wait, and
// an InitialBackoff alone above DefaultMaxBackoff is also the cap. So the
// result of a valid p (Check returns nil) always has
// 0 < InitialBackoff ≤ MaxBackoff, and MaxAttempts ≥ 1 or UnlimitedAttempts.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = DefaultInitialBackoff
		if p.MaxBackoff != 0 {
			p.InitialBackoff = min(DefaultInitialBackoff, p.MaxBackoff)
		}
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = max(DefaultMaxBackoff, p.InitialBackoff)
	}
	return p
}

// Exhausted reports whether failed attempts leave none to make. p must be
// the result of WithDefaults on a valid Policy.
func (p Policy) Exhausted(failed int) bool {
	return p.MaxAttempts != UnlimitedAttempts && failed >= p.MaxAttempts
}

// Wait returns the wait after the n-th failed attempt (n ≥ 1; smaller n
// count as 1): InitialBackoff doubled n-1 times, capped at MaxBackoff. It
// never overflows. p must be the result of WithDefaults on a valid Policy.
func (p Policy) Wait(n int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < n; i++ {
		if d > p.MaxBackoff/2 {
			return p.MaxBackoff // doubling would reach the cap (and could overflow)
		}
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Backoff is the exported RetryPolicy.Backoff of both packages: Wait(n) of p
// with its defaults, or of the default policy if p is invalid.
func (p Policy) Backoff(n int) time.Duration {
	if p.Check("", "") != nil {
		p = Policy{}
	}
	return p.WithDefaults().Wait(n)
}
