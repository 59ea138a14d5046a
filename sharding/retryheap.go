package sharding

import "time"

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
