package timedqueue

import (
	"errors"
	"fmt"
)

// check verifies the store's invariants: the heap order, one live node per
// waiting entry, the waiting count, at most a quarter of the heap stale, the
// index, and that the slab has shrunk.
func (s *store[K]) check() error {
	liveNodes := map[int32]int{}
	for pos, n := range s.heap {
		if pos > 0 && less(n, s.heap[(pos-1)/4]) {
			return fmt.Errorf("heap node %d orders before its parent", pos)
		}
		if s.live(n) {
			liveNodes[n.slot]++
		}
	}
	waiting := 0
	for i := range int32(s.slab.len()) {
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
	if used, live := s.slab.len(), s.index.n; used > minShrink && live*4 < used {
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
	if q.alarm.at != never && !q.alarm.running {
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
	if q.alarm.at != want {
		return fmt.Errorf("timer armed for %v, want %v (now %v)", q.alarm.at, want, now)
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
	return Footprint{Slots: s.slab.len(), Pages: len(s.slab.pages), Index: len(s.index.slots),
		Heap: cap(s.heap), Free: cap(s.free)}
}

// Unlocked reports whether q's mutex is free (it takes and releases it).
func Unlocked[K comparable](q *TimedWorkerQueue[K]) bool {
	if !q.mu.TryLock() {
		return false
	}
	q.mu.Unlock()
	return true
}

// check verifies the index: each occupied slot points to a live slab entry
// whose key hashes to its tag and is reachable from its home position (no
// empty slot in between), no key twice, and the count.
func (x *index[K]) check(slab *slab[K]) error {
	if len(x.slots)&(len(x.slots)-1) != 0 {
		return fmt.Errorf("index size %d is not a power of two", len(x.slots))
	}
	if x.n*4 > len(x.slots)*3 {
		return fmt.Errorf("index holds %d keys in %d slots", x.n, len(x.slots))
	}
	mask := uint32(len(x.slots) - 1)
	n := 0
	seen := map[int32]bool{}
	for p, s := range x.slots {
		if s == 0 {
			continue
		}
		n++
		i := int32(uint32(s) - 1)
		if i < 0 || int(i) >= slab.len() || slab.at(i).state == stateFree {
			return fmt.Errorf("index slot %d points to free or missing slab slot %d", p, i)
		}
		if seen[i] {
			return fmt.Errorf("slab slot %d indexed twice", i)
		}
		seen[i] = true
		tag := uint32(s >> 32)
		if x.tag(slab.at(i).key) != tag {
			return fmt.Errorf("index slot %d: tag %#x, key %v hashes to %#x", p, tag, slab.at(i).key, x.tag(slab.at(i).key))
		}
		for h := tag & mask; h != uint32(p); h = (h + 1) & mask {
			if x.slots[h] == 0 {
				return fmt.Errorf("index slot %d (home %d) unreachable: empty slot %d", p, tag&mask, h)
			}
		}
		if got, _, _ := x.find(slab, slab.at(i).key); got != i {
			return fmt.Errorf("index: find(%v) = %d; want %d", slab.at(i).key, got, i)
		}
	}
	if n != x.n {
		return fmt.Errorf("index counts %d keys, holds %d", x.n, n)
	}
	return nil
}
