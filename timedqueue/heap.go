package timedqueue

import (
	"slices"

	"github.com/taintkit/taintkit/internal/sched"
)

// The heap is a [sched.Heap] of the waiting entries' nodes, ordered by
// (NextAttempt, gen), with lazy deletion: a waiting entry's live node has its
// slot, gen and next. Cancel and reschedule leave the old node stale, dropped
// at the top or by a compaction once more than a quarter of the heap is stale
// (at most 4/3 nodes per waiting entry). A stale node matching a live
// schedule's slot, gen and time (2³² schedules later) can only start that
// schedule at its time, once.

// node is the live top of the heap, as head returns it.
type node struct {
	at   moment // the entry's NextAttempt
	slot int32
}

// live reports whether n is the live node of a waiting entry.
func (s *store[K]) live(n sched.Node) bool {
	e := s.at(n.Slot)
	return e.state == stateWaiting && e.gen == n.Gen && sched.Moment(e.next) == n.At
}

// push makes slot i waiting and adds its node, at its next.
func (s *store[K]) push(i int32) {
	e := s.at(i)
	e.state = stateWaiting
	s.waiting++
	s.heap.Push(sched.Node{At: sched.Moment(e.next), Slot: i, Gen: e.gen})
}

// unwait records that slot i stopped waiting: popped, or freed or given a new
// gen by the caller, which made its node stale.
func (s *store[K]) unwait(i int32) {
	s.waiting--
	s.dropStaleIfMany(i)
}

// head drops stale nodes from the top and returns the live top, if any.
func (s *store[K]) head() (node, bool) {
	for len(s.heap) > 0 {
		if n := s.heap[0]; s.live(n) {
			return node{at: moment(n.At), slot: n.Slot}, true
		}
		s.heap.RemoveTop()
	}
	return node{}, false
}

// pop removes the live top that head has just returned and returns its slot,
// which the caller takes out of stateWaiting.
func (s *store[K]) pop() int32 {
	i := s.heap[0].Slot
	s.heap.RemoveTop()
	s.unwait(i)
	return i
}

// dropStaleIfMany compacts the heap once more than a quarter of it is stale:
// O(1) amortised. Slot skip has stopped waiting, in stateWaiting or not.
func (s *store[K]) dropStaleIfMany(skip int32) {
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		// Checking each node against its entry is a cache miss: unless the
		// slab is much larger (many running), read the slab in order.
		if s.slab.Len() <= 4*len(s.heap) {
			s.heap = s.appendWaiting(s.heap[:0], skip)
		} else {
			s.heap = slices.DeleteFunc(s.heap, func(n sched.Node) bool { return !s.live(n) })
		}
		s.heap.Heapify()
	}
}

// appendWaiting appends the live node of every waiting entry but slot skip
// (-1: none) to h, in slot order.
func (s *store[K]) appendWaiting(h sched.Heap, skip int32) sched.Heap {
	for i := range int32(s.slab.Len()) {
		if e := s.at(i); e.state == stateWaiting && i != skip {
			h = append(h, sched.Node{At: sched.Moment(e.next), Slot: i, Gen: e.gen})
		}
	}
	return h
}
