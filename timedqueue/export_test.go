package timedqueue

import (
	"errors"
	"fmt"
)

// check verifies the store's invariants: the heap order, one live node per
// waiting entry, the waiting count, and at most a quarter of the heap stale.
func (s *store[K]) check() error {
	liveNodes := map[int32]int{}
	for pos, n := range s.heap {
		if pos > 0 && less(n, s.heap[(pos-1)/4]) {
			return fmt.Errorf("heap node %d orders before its parent", pos)
		}
		if s.live(n) {
			liveNodes[n.idx]++
		}
	}
	waiting := 0
	for i := range s.slab {
		if s.slab[i].state != stateWaiting {
			continue
		}
		waiting++
		if c := liveNodes[int32(i)]; c != 1 {
			return fmt.Errorf("waiting slot %d has %d live heap nodes", i, c)
		}
	}
	if waiting != s.waiting {
		return fmt.Errorf("%d waiting entries, counted %d", waiting, s.waiting)
	}
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		return fmt.Errorf("%d of %d heap nodes stale", stale, len(s.heap))
	}
	for key, i := range s.m {
		if s.slab[i].key != key || s.slab[i].state == stateFree {
			return fmt.Errorf("map entry %v points to slot %d holding %v (state %d)", key, i, s.slab[i].key, s.slab[i].state)
		}
	}
	return nil
}

// CheckInvariants verifies q's internal invariants at a quiescent point (no
// clock change since the last pump): the store's (see store.check), and that the
// timer is armed for the earliest live schedule if that is in the future, a
// slot is free and no attempt deadline comes first, never for a stale one.
func CheckInvariants[K comparable](q *TimedWorkerQueue[K]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	if err := q.s.check(); err != nil {
		return err
	}
	if q.armedAt != never && !q.timerOn {
		return errors.New("timer armed with no timer goroutine")
	}
	if q.active >= q.max && q.timeout <= 0 {
		// Every slot is busy: the top may be stale and the timer does not
		// matter (see pumpLocked); the next worker to finish pumps.
		return nil
	}
	now := q.nowNs()
	want := q.minDeadline
	// Without dropping stale tops: the top must already be live.
	if len(q.s.heap) > 0 {
		n := q.s.heap[0]
		if !q.s.live(n) {
			return errors.New("stale node at the top of the heap at a quiescent point")
		}
		if n.at > now {
			want = min(want, n.at)
		} else if q.active < q.max {
			return fmt.Errorf("head due at %d (now %d) with %d/%d slots busy", n.at, now, q.active, q.max)
		}
	}
	if q.armedAt != want {
		return fmt.Errorf("timer armed for %d, want %d (now %d)", q.armedAt, want, now)
	}
	return nil
}

// Unlocked reports whether q's mutex is free (it takes and releases it).
func Unlocked[K comparable](q *TimedWorkerQueue[K]) bool {
	if !q.mu.TryLock() {
		return false
	}
	q.mu.Unlock()
	return true
}
