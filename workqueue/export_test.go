package workqueue

import (
	"errors"
	"fmt"

	"github.com/taintkit/taintkit/internal/sched"
)

// CheckInvariants verifies q's internal invariants at a quiescent point (no
// clock step since the last pump): the counts, the heap, the lanes, the
// index, that the slab has shrunk, and that the alarm is armed for the
// earliest live waiting entry.
func CheckInvariants[T comparable](q *Queue[T]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := &q.s
	var waiting, ready, held, processing, live int
	for i := range int32(s.slab.Len()) {
		e := s.at(i)
		if e.queued == queuedNone && !e.processing {
			continue
		}
		live++
		if got, _ := s.find(e.key, s.tag(e.key)); got != i {
			return fmt.Errorf("find(%v) = %d, want %d", e.key, got, i)
		}
		switch e.queued {
		case queuedWaiting:
			waiting++
		case queuedReady:
			ready++
			if e.processing {
				held++
			}
		}
		if e.processing {
			processing++
		}
	}
	if live != s.index.Len() {
		return fmt.Errorf("index holds %d keys, the slab %d entries", s.index.Len(), live)
	}
	if waiting != s.waiting || ready != s.ready || held != s.held || processing != q.processing {
		return fmt.Errorf("counted waiting %d, ready %d, held %d, processing %d; hold %d, %d, %d, %d",
			waiting, ready, held, processing, s.waiting, s.ready, s.held, q.processing)
	}
	if used := s.slab.Len(); used > minShrink && live*4 < used {
		return fmt.Errorf("slab not shrunk: %d slots for %d entries", used, live)
	}
	if err := s.checkHeap(); err != nil {
		return err
	}
	if err := s.checkLanes(); err != nil {
		return err
	}
	if q.down {
		return nil
	}
	want := q.m.next
	for _, n := range s.heap {
		if s.liveWaiting(n) && n.At.Before(want) {
			want = n.At
		}
	}
	if now := sched.MomentOf(q.clock.Now()); !now.Before(want) && want != q.m.next {
		return fmt.Errorf("an entry due at %v (now %v) is still waiting", want, now)
	}
	if q.alarm.At() != want {
		return fmt.Errorf("alarm armed for %v, want %v", q.alarm.At(), want)
	}
	return nil
}

func (s *store[T]) checkHeap() error {
	if pos := s.heap.Misplaced(); pos >= 0 {
		return fmt.Errorf("heap node %d orders before its parent", pos)
	}
	nodes := map[int32]int{}
	for _, n := range s.heap {
		if s.liveWaiting(n) {
			nodes[n.Slot]++
		}
	}
	for i := range int32(s.slab.Len()) {
		if s.at(i).queued == queuedWaiting && nodes[i] != 1 {
			return fmt.Errorf("waiting slot %d has %d live heap nodes", i, nodes[i])
		}
	}
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		return fmt.Errorf("%d of %d heap nodes stale", stale, len(s.heap))
	}
	return nil
}

func (s *store[T]) checkLanes() error {
	nodes := map[int32]int{}
	for k, l := range s.lanes {
		if k > 0 && s.lanes[k-1].prio <= l.prio {
			return errors.New("lanes out of order")
		}
		fifo := l.fifo
		for j := 1; j < len(fifo); j++ {
			if !newer(fifo[j].gen, fifo[j-1].gen) {
				return fmt.Errorf("lane %d: fifo out of order at %d", l.prio, j)
			}
		}
		if pos := l.late.Misplaced(); pos >= 0 {
			return fmt.Errorf("lane %d: late node %d orders before its parent", l.prio, pos)
		}
		live := 0
		count := func(n readyNode) {
			if s.liveReady(n) {
				live++
				nodes[n.slot]++
				if s.priority(s.at(n.slot)) != l.prio {
					live = -1 << 30
				}
			}
		}
		for _, n := range fifo {
			count(n)
		}
		for _, n := range l.late {
			count(readyNode{n.Slot, n.Gen})
		}
		if live != l.live {
			return fmt.Errorf("lane %d: %d live nodes, counts %d", l.prio, live, l.live)
		}
		if l.stale() > max(l.live, 32) {
			return fmt.Errorf("lane %d: %d stale nodes for %d live", l.prio, l.stale(), l.live)
		}
	}
	for i := range int32(s.slab.Len()) {
		if e := s.at(i); e.queued == queuedReady && !e.processing && nodes[i] != 1 {
			return fmt.Errorf("ready slot %d has %d live lane nodes", i, nodes[i])
		}
	}
	return nil
}

// Footprint is what a queue holds that can shrink.
type Footprint struct {
	Slots, Index, Heap, Lanes int
}

// FootprintOf returns q's footprint.
func FootprintOf[T comparable](q *Queue[T]) Footprint {
	q.mu.Lock()
	defer q.mu.Unlock()
	f := Footprint{Slots: q.s.slab.Len(), Index: q.s.index.Size(), Heap: cap(q.s.heap)}
	for _, l := range q.s.lanes {
		f.Lanes += cap(l.fifo) + cap(l.late)
	}
	return f
}
