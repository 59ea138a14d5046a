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
		if saturated(n.at) {
			return fmt.Errorf("heap node %d has a saturated time", pos)
		}
		if s.live(n) {
			liveNodes[n.idx]++
		}
	}
	for pos, n := range s.far {
		if pos > 0 && s.far.Less(pos, (pos-1)/2) {
			return fmt.Errorf("far heap node %d orders before its parent", pos)
		}
		if s.farLive(n) {
			liveNodes[n.idx]++
		}
	}
	waiting, farWaiting := 0, 0
	for i := range int32(s.slab.len()) {
		if s.at(i).state != stateWaiting {
			continue
		}
		if saturated(s.at(i).next) {
			farWaiting++
		} else {
			waiting++
		}
		if c := liveNodes[i]; c != 1 {
			return fmt.Errorf("waiting slot %d has %d live heap nodes", i, c)
		}
	}
	if waiting != s.waiting || farWaiting != s.farWaiting {
		return fmt.Errorf("%d+%d waiting entries, counted %d+%d", waiting, farWaiting, s.waiting, s.farWaiting)
	}
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		return fmt.Errorf("%d of %d heap nodes stale", stale, len(s.heap))
	}
	if stale := len(s.far) - s.farWaiting; stale*4 > len(s.far) {
		return fmt.Errorf("%d of %d far heap nodes stale", stale, len(s.far))
	}
	if err := s.idx.check(&s.slab); err != nil {
		return err
	}
	if used, live := s.slab.len(), s.idx.len(); used > minShrink && live*4 < used {
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
	now := q.read()
	want := q.minDeadline
	// Without dropping stale tops: the tops must already be live.
	if len(q.s.heap) > 0 && !q.s.live(q.s.heap[0]) {
		return errors.New("stale node at the top of the heap at a quiescent point")
	}
	if len(q.s.far) > 0 && !q.s.farLive(q.s.far[0]) {
		return errors.New("stale node at the top of the far heap at a quiescent point")
	}
	if n, far, ok := q.s.peek(); ok {
		if !q.s.due(n, far, now) {
			if at := q.s.first(n, far); at.before(want) {
				want = at
			}
		} else if q.active < q.max {
			return fmt.Errorf("head due at %v (now %v) with %d/%d slots busy", q.s.first(n, far), now.at, q.active, q.max)
		}
	}
	if want == neverInstant {
		if q.armedAt != never {
			return fmt.Errorf("timer armed for %v with nothing to wait for", q.armedFor)
		}
	} else if q.armedAt == never || q.armedFor != want {
		return fmt.Errorf("timer armed for %v (armed: %v), want %v (now %v)", q.armedFor, q.armedAt != never, want, now.at)
	}
	return nil
}

// SetMinShrink sets the size under which nothing shrinks, so that a test can
// make the store shrink at every opportunity, and returns a func restoring it.
// Tests that call it must not run in parallel.
func SetMinShrink(n int) (restore func()) {
	old := minShrink
	minShrink = n
	return func() { minShrink = old }
}

// Footprint is what a queue holds that can shrink.
type Footprint struct {
	Slots   int // allocated slab slots, free or not
	Pages   int // slab pages
	Index   int // index table slots
	Heap    int // heap capacity
	Free    int // free-list capacity
	Shrinks int // slab compactions so far
}

// FootprintOf returns q's footprint.
func FootprintOf[K comparable](q *TimedWorkerQueue[K]) Footprint {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.s
	return Footprint{Slots: s.slab.len(), Pages: len(s.slab.pages), Index: len(s.idx.slots),
		Heap: cap(s.heap), Free: cap(s.free), Shrinks: s.shrinks}
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
	if len(x.slots) > indexMinSize && x.n*16 < len(x.slots)*3 {
		return fmt.Errorf("index holds %d keys in %d slots: not shrunk", x.n, len(x.slots))
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
		if got, ok := x.get(slab, slab.at(i).key); !ok || got != i {
			return fmt.Errorf("index: get(%v) = %d, %v; want %d", slab.at(i).key, got, ok, i)
		}
	}
	if n != x.n {
		return fmt.Errorf("index counts %d keys, holds %d", x.n, n)
	}
	return nil
}
