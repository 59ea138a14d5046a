package timedqueue

import "slices"

// node is one element of a store's heap: everything the heap order needs, so
// that sifts never read the slab. 20 bytes.
type node struct {
	at   moment // the entry's NextAttempt when the node was pushed
	slot int32
	gen  uint32 // the entry's gen when the node was pushed
}

// The heap is a 4-ary min-heap of nodes ordered by (at, gen), with lazy
// deletion: a waiting entry's live node has its slot, gen and at. Cancel and
// reschedule leave the old node stale, dropped at the top or by a compaction
// once more than a quarter of the heap is stale (at most 4/3 nodes per
// waiting entry). Ties go to the lower gen, in serial-number arithmetic. A
// stale node matching a live schedule's slot, gen and time (2³² schedules
// later) can only start that schedule at its time, once.

func less(a, b node) bool {
	if a.at != b.at {
		return a.at.before(b.at)
	}
	return int32(a.gen-b.gen) < 0
}

// live reports whether n is the live node of a waiting entry.
func (s *store[K]) live(n node) bool {
	e := s.at(n.slot)
	return e.state == stateWaiting && e.gen == n.gen && e.next == n.at
}

// push makes slot i waiting and adds its node, at its next.
func (s *store[K]) push(i int32) {
	e := s.at(i)
	e.state = stateWaiting
	s.waiting++
	s.heap = append(s.heap, node{})
	s.up(len(s.heap)-1, node{at: e.next, slot: i, gen: e.gen})
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
			return n, true
		}
		s.removeTop()
	}
	return node{}, false
}

// pop removes the live top that head has just returned and returns its slot,
// which the caller takes out of stateWaiting.
func (s *store[K]) pop() int32 {
	i := s.heap[0].slot
	s.removeTop()
	s.unwait(i)
	return i
}

func (s *store[K]) removeTop() {
	last := len(s.heap) - 1
	n := s.heap[last]
	s.heap = s.heap[:last]
	if last > 0 {
		s.down(0, n)
	}
}

// dropStaleIfMany compacts the heap once more than a quarter of it is stale:
// O(1) amortised. Slot skip has stopped waiting, in stateWaiting or not.
func (s *store[K]) dropStaleIfMany(skip int32) {
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		// Checking each node against its entry is a cache miss: unless the
		// slab is much larger (many running), read the slab in order.
		if s.slab.len() <= 4*len(s.heap) {
			s.heap = s.appendWaiting(s.heap[:0], skip)
		} else {
			s.heap = slices.DeleteFunc(s.heap, func(n node) bool { return !s.live(n) })
		}
		s.heapify()
	}
}

// appendWaiting appends the live node of every waiting entry but slot skip
// (-1: none) to h, in slot order.
func (s *store[K]) appendWaiting(h []node, skip int32) []node {
	for i := range int32(s.slab.len()) {
		if e := s.at(i); e.state == stateWaiting && i != skip {
			h = append(h, node{at: e.next, slot: i, gen: e.gen})
		}
	}
	return h
}

// heapify restores the heap order in O(n).
func (s *store[K]) heapify() {
	for pos := (len(s.heap) - 2) / 4; pos >= 0 && len(s.heap) > 1; pos-- {
		s.down(pos, s.heap[pos])
	}
}

// up moves node n from the hole at pos towards the root.
func (s *store[K]) up(pos int, n node) {
	h := s.heap
	for pos > 0 {
		parent := (pos - 1) / 4
		if !less(n, h[parent]) {
			break
		}
		h[pos] = h[parent]
		pos = parent
	}
	h[pos] = n
}

// down moves node n from the hole at pos towards the leaves.
func (s *store[K]) down(pos int, n node) {
	h := s.heap
	for {
		first := 4*pos + 1
		if first >= len(h) {
			break
		}
		best := first
		for c := first + 1; c < min(first+4, len(h)); c++ {
			if less(h[c], h[best]) {
				best = c
			}
		}
		if !less(h[best], n) {
			break
		}
		h[pos] = h[best]
		pos = best
	}
	h[pos] = n
}
