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

// retryEntry is a retry waiting in a lane's heap: item, of shard, is queued
// again at due, unless its state's gen no longer matches (then the entry is
// stale and skipped). seq breaks ties so equal due times keep failure order.
type retryEntry[T any] struct {
	due   time.Time
	seq   uint64
	gen   uint64
	shard int
	item  T
}

func (e *retryEntry[T]) before(o *retryEntry[T]) bool {
	if !e.due.Equal(o.due) {
		return e.due.Before(o.due)
	}
	return e.seq < o.seq
}

// retryHeap is a binary min-heap of retries by (due, seq). push and pop are
// O(log n). Stale entries (lazy deletion) stay until they come due; there is
// at most one per failure within MaxBackoff, so the heap stays bounded by the
// failure rate.
type retryHeap[T any] []retryEntry[T]

func (h *retryHeap[T]) push(e retryEntry[T]) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].before(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes and returns the earliest entry. h must not be empty.
func (h *retryHeap[T]) pop() retryEntry[T] {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = retryEntry[T]{} // release the item
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].before(&s[m]) {
			m = l
		}
		if r < len(s) && s[r].before(&s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	if cap(s) > 64 && len(s) < cap(s)/4 {
		s = append(make([]retryEntry[T], 0, cap(s)/2), s...)
	}
	*h = s
	return top
}
