package sharding

import "github.com/taintkit/taintkit/internal/mapshrink"

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

// laneShrinkPolicy is when forget rebuilds a lane's map. An empty lane keeps
// its map below laneRebuildAt: lanes empty all the time (a worker keeping up
// with its adds), and would otherwise allocate a map at every refill.
var laneShrinkPolicy = mapshrink.Policy{MinPeak: laneRebuildAt}

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
func (l *lane[T]) done(item T, failed, stopping bool, retry RetryPolicy, gen uint64) (outcome, int) {
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
	if retry.exhausted(st.attempts) {
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
// fit ([mapshrink.Fit]): a mass of items handled while a few wait for a
// retry must not keep the mass's memory. A lane keeps at most laneRebuildAt
// items' worth beyond what it holds, and a small lane that empties and fills
// again reuses its map.
func (l *lane[T]) forget(item T) {
	delete(l.items, item)
	l.items = mapshrink.Fit(laneShrinkPolicy, l.items, &l.peak)
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
