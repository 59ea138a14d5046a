package sharding

import "sync"

// ring is a FIFO of T on a power-of-two circular buffer. It grows by
// doubling and shrinks by halving when a quarter full, down to keepRing
// slots, so its memory follows its length both ways. push and pop are
// amortised O(1). Popped slots are zeroed so the buffer keeps no item alive.
// The zero ring is empty.
type ring[T any] struct {
	buf  []T
	head int // index of the front item
	n    int // number of items
}

const (
	minRing = 8 // the first buffer
	// keepRing is the size below which a ring does not shrink. Halving at
	// a quarter is amortised O(1), but for a lane going between a few
	// items and a few more (a worker keeping up with its adds) it would
	// allocate a small buffer every few operations: at 500,000 pod updates
	// in the noexecute demo, 74 MB of buffers. A few KiB per lane is kept
	// instead.
	keepRing = 256
)

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// pop removes and returns the front item. r must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > keepRing && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return v
}

// resize moves the items, in order, to a new buffer of size (a power of
// two, at least r.n).
func (r *ring[T]) resize(size int) {
	buf := make([]T, size)
	if r.n > 0 {
		k := copy(buf, r.buf[r.head:min(len(r.buf), r.head+r.n)])
		copy(buf[k:], r.buf[:r.n-k])
	}
	r.buf, r.head = buf, 0
}

// phase is where an item stands in its lane.
type phase uint8

const (
	phaseQueued        phase = iota + 1 // in the lane's ring, not started
	phaseHandling                       // its handler is running
	phaseHandlingReadd                  // running, and added again meanwhile
	phaseWaiting                        // failed, waiting in the retry heap
)

// itemState is the one entry a lane keeps per item.
type itemState struct {
	phase phase
	// attempts counts the failed attempts since the item was last queued
	// by an add.
	attempts int
	// gen identifies the retry an item in phaseWaiting waits for; a retry
	// heap entry with another gen is stale.
	gen uint64
}

// lane is one priority lane of a shard: the FIFO of queued items and the
// state of every item the lane knows (queued, being handled, or waiting for a
// retry). Its methods must be called with the shard's mutex held.
type lane[T comparable] struct {
	q     ring[T]
	items map[T]itemState
	// peak is the largest len(items) since items was last made; see
	// forget.
	peak int
}

// laneRebuildAt is the smallest peak after which a lane's map, once down to
// a quarter of its peak, is rebuilt to fit: see forget.
const laneRebuildAt = 1024

// outcome is what the end of an attempt did to an item.
type outcome uint8

const (
	outcomeDone    outcome = iota // success: the item is forgotten
	outcomeRequeue                // it was re-added while running: queued again
	outcomeRetry                  // failed: waiting for a retry
	outcomeDrop                   // failed for the last time: forgotten
	outcomeStopped                // failed while stopping: queued again, for stop to drop
)

// add applies an add of item and reports whether it queued the item (at the
// back of the ring), and whether that cancelled a retry it waited for. An
// item already queued stays where it is; one being handled is marked to run
// once more; one waiting for a retry is queued now, which cancels the retry,
// with its attempts reset.
func (l *lane[T]) add(item T) (queued, retryCancelled bool) {
	if l.items == nil {
		l.items = make(map[T]itemState)
	}
	st, ok := l.items[item]
	if ok {
		switch st.phase {
		case phaseQueued, phaseHandlingReadd:
			return false, false
		case phaseHandling:
			st.phase = phaseHandlingReadd
			l.items[item] = st
			return false, false
		}
		// phaseWaiting: the heap entry goes stale once the phase changes.
	}
	l.items[item] = itemState{phase: phaseQueued}
	l.peak = max(l.peak, len(l.items))
	l.q.push(item)
	return true, ok
}

// pop takes the front item for handling. The lane must not be empty.
func (l *lane[T]) pop() T {
	item := l.q.pop()
	st := l.items[item]
	st.phase = phaseHandling
	l.items[item] = st
	return item
}

// done records the end of an attempt of item, which failed if failed. A
// failure that may still be retried puts the item in phaseWaiting with gen.
// A failure while stopping (Run's context done) is not counted: the item is
// queued again, for the shutdown to drop. It returns what happened and the
// item's failed attempts so far.
func (l *lane[T]) done(item T, failed, stopping bool, maxAttempts int, gen uint64) (outcome, int) {
	st := l.items[item]
	if st.phase == phaseHandlingReadd {
		// A re-add supersedes the outcome, failure or not: run once more,
		// from a clean slate.
		l.items[item] = itemState{phase: phaseQueued}
		l.q.push(item)
		return outcomeRequeue, 0
	}
	if !failed {
		l.forget(item)
		return outcomeDone, st.attempts
	}
	if stopping {
		st.phase = phaseQueued
		l.items[item] = st
		l.q.push(item)
		return outcomeStopped, st.attempts
	}
	st.attempts++
	if st.attempts >= maxAttempts {
		l.forget(item)
		return outcomeDrop, st.attempts
	}
	st.phase, st.gen = phaseWaiting, gen
	l.items[item] = st
	return outcomeRetry, st.attempts
}

// retryDue queues item at the back of the lane if it still waits for the
// retry gen, and reports whether it did.
func (l *lane[T]) retryDue(item T, gen uint64) bool {
	st, ok := l.items[item]
	if !ok || st.phase != phaseWaiting || st.gen != gen {
		return false // re-added, dropped or rescheduled since: stale
	}
	st.phase = phaseQueued
	l.items[item] = st
	l.q.push(item)
	return true
}

// forget deletes item's state. Go maps never shrink, so once the lane holds
// a quarter of a peak of at least laneRebuildAt items, the map is rebuilt to
// fit (or dropped, if empty): a mass of items handled while a few wait for a
// retry must not keep the mass's memory. A lane keeps at most laneRebuildAt
// items' worth beyond what it holds, and a small lane that empties and fills
// again reuses its map. The copy costs less than the three quarters of the
// peak deleted since the map was made, so it is amortised O(1) per deletion;
// and the rebuilt map's peak is its size, so a lane hovering around the
// threshold rebuilds once, not at every step.
func (l *lane[T]) forget(item T) {
	delete(l.items, item)
	if l.peak < laneRebuildAt || len(l.items) > l.peak/4 {
		return
	}
	if len(l.items) == 0 {
		l.items, l.peak = nil, 0
		return
	}
	fresh := make(map[T]itemState, len(l.items))
	for k, v := range l.items {
		fresh[k] = v
	}
	l.items, l.peak = fresh, len(fresh)
}

// drain empties the lane of queued and retry-waiting items and returns them,
// queued items first in FIFO order, with their failed attempts. Items being
// handled are kept: they are not the caller's to drop.
func (l *lane[T]) drain() (queued, waiting []dropped[T]) {
	for l.q.len() > 0 {
		item := l.q.pop()
		queued = append(queued, dropped[T]{item, l.items[item].attempts})
		l.forget(item)
	}
	for item, st := range l.items {
		if st.phase == phaseWaiting {
			waiting = append(waiting, dropped[T]{item, st.attempts})
		}
	}
	// Forgotten after the loop: forget may replace the map being ranged.
	for _, w := range waiting {
		l.forget(w.item)
	}
	return queued, waiting
}

type dropped[T any] struct {
	item     T
	attempts int
}

// shard is one worker's share of the items: its two lanes under one mutex,
// and the channel that wakes its worker. Shards share no lock, so one slow
// shard never slows another.
type shard[H, L comparable] struct {
	mu     sync.Mutex
	hi     lane[H]
	lo     lane[L]
	burst  int    // high items taken in a row while low items waited
	gen    uint64 // last retry generation handed out
	closed bool   // Run has drained the shard; adds are dropped

	// wake has capacity 1; adds do a non-blocking send after queueing, so
	// a pending wake-up is never lost and an add never blocks.
	wake chan struct{}

	_ [64]byte // keep hot shards off each other's cache lines
}

// pick chooses the lane the worker takes its next item from, and reports
// false if both are empty. High wins unless maxBurst > 0 and the worker has
// already taken maxBurst high items in a row while low items waited.
func (s *shard[H, L]) pick(maxBurst int) (Lane, bool) {
	hi, lo := s.hi.q.len(), s.lo.q.len()
	switch {
	case hi > 0 && (lo == 0 || maxBurst == 0 || s.burst < maxBurst):
		if lo > 0 {
			s.burst++
		} else {
			s.burst = 0
		}
		return LaneHigh, true
	case lo > 0:
		s.burst = 0
		return LaneLow, true
	}
	return 0, false
}

func (s *shard[H, L]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
