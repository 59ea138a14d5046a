package sharding

import (
	"fmt"
	"time"
)

// Defaults for the zero fields of a [RetryPolicy]: five attempts in all,
// backing off from a second, doubling, up to a minute.
const (
	DefaultMaxAttempts    = 5
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
)

// RetryPolicy says when a failed item is tried again. The first retry waits
// InitialBackoff on the dispatcher's clock after the failed attempt returned,
// each next one twice as long, capped at MaxBackoff, with no jitter. After
// MaxAttempts attempts in all, the item is dropped.
//
// Zero fields take the Default constants. New rejects negative values, and a
// MaxBackoff below InitialBackoff when both are set.
type RetryPolicy struct {
	// MaxAttempts counts the first: 1 means no retry.
	MaxAttempts int
	// InitialBackoff is the first wait; zero means DefaultInitialBackoff,
	// or MaxBackoff if that is set and smaller.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait; zero means DefaultMaxBackoff, or
	// InitialBackoff if that is larger.
	MaxBackoff time.Duration
}

// validate reports the first invalid field of p.
func (p RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("sharding: Retry.MaxAttempts must not be negative, got %d", p.MaxAttempts)
	case p.InitialBackoff < 0:
		return fmt.Errorf("sharding: Retry.InitialBackoff must not be negative, got %v", p.InitialBackoff)
	case p.MaxBackoff < 0:
		return fmt.Errorf("sharding: Retry.MaxBackoff must not be negative, got %v", p.MaxBackoff)
	case p.MaxBackoff != 0 && p.InitialBackoff != 0 && p.MaxBackoff < p.InitialBackoff:
		return fmt.Errorf("sharding: Retry.MaxBackoff must not be less than Retry.InitialBackoff (%v), got %v",
			p.InitialBackoff, p.MaxBackoff)
	}
	return nil
}

// withDefaults returns p with its zero fields replaced by the defaults.
// p must be valid.
func (p RetryPolicy) withDefaults() RetryPolicy {
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

// backoff returns the wait after the failures-th failed attempt (1-based):
// InitialBackoff doubled failures-1 times, capped at MaxBackoff. It never
// overflows. p must have its defaults applied.
func (p RetryPolicy) backoff(failures int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < failures; i++ {
		if d > p.MaxBackoff/2 {
			return p.MaxBackoff
		}
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

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
