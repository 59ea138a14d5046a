package timedqueue

import (
	"container/heap"
	"slices"
)

// The far heap holds the waiting entries whose NextAttempt is outside
// 1678–2262 (saturated in entry.next), ordered at full precision. Those before
// 1678 come before every node of the main heap, those after 2262 after: see
// store.peek. It uses lazy deletion as the main heap does (see store); such
// times are rare, so it is a plain container/heap.

// xnode is a far-heap node: as hnode, with the time as an instant.
type xnode struct {
	at  instant
	idx int32
	gen uint32
}

// farHeap is a binary min-heap of xnodes ordered by (at, gen).
type farHeap []xnode

func (h farHeap) Len() int { return len(h) }
func (h farHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at.before(h[j].at)
	}
	return int32(h[i].gen-h[j].gen) < 0
}
func (h farHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *farHeap) Push(x any)   { *h = append(*h, x.(xnode)) }
func (h *farHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	*h = old[:len(old)-1]
	return n
}

// farLive reports whether n is the live node of a waiting entry.
func (s *store[K]) farLive(n xnode) bool {
	e := s.at(n.idx)
	return e.state == stateWaiting && uint32(e.seq) == n.gen && saturated(e.next) && s.nextAt(n.idx) == n.at
}

// pushFar adds the node of slot i, whose next is saturated.
func (s *store[K]) pushFar(i int32) {
	s.farWaiting++
	heap.Push(&s.far, xnode{at: s.nextAt(i), idx: i, gen: uint32(s.at(i).seq)})
}

// farHead drops the stale nodes at the top of the far heap and returns the
// live top, if any.
func (s *store[K]) farHead() (xnode, bool) {
	for len(s.far) > 0 {
		if n := s.far[0]; s.farLive(n) {
			return n, true
		}
		heap.Pop(&s.far)
	}
	return xnode{}, false
}

// popFar removes the live top that farHead has just returned.
func (s *store[K]) popFar() int32 {
	i := heap.Pop(&s.far).(xnode).idx
	s.farWaiting--
	s.farBound()
	return i
}

// unwaitFar is store.unwait for an entry whose node is in the far heap.
func (s *store[K]) unwaitFar() (topStale bool) {
	s.farWaiting--
	topStale = !s.farLive(s.far[0])
	s.farBound()
	return topStale
}

// farBound drops the stale nodes once they are more than a quarter of the far
// heap, as store.bound does for the main heap.
func (s *store[K]) farBound() {
	if stale := len(s.far) - s.farWaiting; stale*4 > len(s.far) {
		h := s.far[:0]
		for _, n := range s.far {
			if s.farLive(n) {
				h = append(h, n)
			}
		}
		clear(s.far[len(h):])
		s.far = h
		heap.Init(&s.far)
	}
	if cap(s.far) > minShrink && len(s.far)*4 < cap(s.far) {
		s.far = slices.Clip(append(make(farHeap, 0, 2*len(s.far)), s.far...))
	}
}
