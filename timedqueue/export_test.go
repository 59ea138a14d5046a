package timedqueue

import (
	"errors"
	"fmt"

	"github.com/taintkit/taintkit/internal/sched"
)

// check verifies the store's invariants: the heap order, one live node per
// waiting entry, the waiting count, at most a quarter of the heap stale, the
// index, and that the slab has shrunk.
func (s *store[K]) check() error {
	if pos := s.heap.Misplaced(); pos >= 0 {
		return fmt.Errorf("heap node %d orders before its parent", pos)
	}
	liveNodes := map[int32]int{}
	for _, n := range s.heap {
		if s.live(n) {
			liveNodes[n.Slot]++
		}
	}
	waiting := 0
	for i := range int32(s.slab.Len()) {
		if s.at(i).state != stateWaiting {
			continue
		}
		waiting++
		if c := liveNodes[i]; c != 1 {
			return fmt.Errorf("waiting slot %d has %d live heap nodes", i, c)
		}
	}
	if waiting != s.waiting {
		return fmt.Errorf("%d waiting entries, counted %d", waiting, s.waiting)
	}
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		return fmt.Errorf("%d of %d heap nodes stale", stale, len(s.heap))
	}
	if err := s.index.check(&s.slab); err != nil {
		return err
	}
	if used, live := s.slab.Len(), s.index.Len(); used > minShrink && live*4 < used {
		return fmt.Errorf("slab not shrunk: %d slots for %d entries", used, live)
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
	if q.down.closed {
		return nil
	}
	if err := q.s.check(); err != nil {
		return err
	}
	if q.alarm.armedFor() != never && !q.alarm.running {
		return errors.New("timer armed with no timer goroutine")
	}
	if q.active >= q.max && q.timeout <= 0 {
		// Every slot is busy: the top may be stale and the timer does not
		// matter (see pumpLocked); the next worker to finish pumps.
		return nil
	}
	now := momentOf(q.clock.Now())
	want := q.deadlines.min
	// Without dropping stale tops: the top must already be live.
	if len(q.s.heap) > 0 && !q.s.live(q.s.heap[0]) {
		return errors.New("stale node at the top of the heap at a quiescent point")
	}
	if n, ok := q.s.head(); ok {
		if now.before(n.at) {
			if n.at.before(want) {
				want = n.at
			}
		} else if q.active < q.max {
			return fmt.Errorf("head due at %v (now %v) with %d/%d slots busy", n.at, now, q.active, q.max)
		}
	}
	if q.alarm.armedFor() != want {
		return fmt.Errorf("timer armed for %v, want %v (now %v)", q.alarm.armedFor(), want, now)
	}
	return nil
}

// Footprint is what a queue holds that can shrink.
type Footprint struct {
	Slots int // allocated slab slots, free or not
	Pages int // slab pages
	Index int // index table slots
	Heap  int // heap capacity
	Free  int // free-list capacity
}

// FootprintOf returns q's footprint.
func FootprintOf[K comparable](q *TimedWorkerQueue[K]) Footprint {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := &q.s
	pages, free := s.slab.Footprint()
	return Footprint{Slots: s.slab.Len(), Pages: pages, Index: s.index.Size(),
		Heap: cap(s.heap), Free: free}
}

// Unlocked reports whether q's mutex is free (it takes and releases it).
func Unlocked[K comparable](q *TimedWorkerQueue[K]) bool {
	if !q.mu.TryLock() {
		return false
	}
	q.mu.Unlock()
	return true
}

// check verifies the index against the slab: every live entry is found at
// its slot, and the index counts exactly the live entries. (sched's tests
// check the table itself: probe runs, backward shifts, sizes.)
func (x *index[K]) check(slab *sched.Slab[entry[K]]) error {
	live := 0
	for i := range int32(slab.Len()) {
		e := slab.At(i)
		if e.state == stateFree {
			continue
		}
		live++
		if got, _, _ := x.find(slab, e.key); got != i {
			return fmt.Errorf("index: find(%v) = %d; want %d", e.key, got, i)
		}
	}
	if live != x.Len() {
		return fmt.Errorf("index counts %d keys, the slab holds %d", x.Len(), live)
	}
	return nil
}
