package sched

// Node is one element of a Heap: a time, and the slot and generation of the
// entry it stands for, so that sifts never read the slab. 20 bytes.
type Node struct {
	At   Moment
	Slot int32
	Gen  uint32
}

// Less orders nodes by At, then by Gen in serial-number arithmetic (the lower
// first, across the 2³² wrap): schedules at the same time come out in the
// order their generations were given.
func Less(a, b Node) bool {
	if a.At != b.At {
		return a.At.Before(b.At)
	}
	return int32(a.Gen-b.Gen) < 0
}

// A Heap is a 4-ary min-heap of nodes in Less order; its top is h[0]. It is
// a plain slice: a queue deletes lazily, leaving a node whose entry has
// moved on (another Gen or At) stale in the heap, and drops stale nodes at
// the top or by filtering the slice and calling Heapify. Four children per
// node make it half as deep as a binary heap, with each level's children in
// one or two cache lines.
type Heap []Node

// Push adds n. O(log n).
func (h *Heap) Push(n Node) {
	*h = append(*h, Node{})
	h.up(len(*h)-1, n)
}

// RemoveTop removes h[0], which must exist. O(log n).
func (h *Heap) RemoveTop() {
	last := len(*h) - 1
	n := (*h)[last]
	*h = (*h)[:last]
	if last > 0 {
		h.down(0, n)
	}
}

// Heapify restores the heap order of any slice in O(n).
func (h Heap) Heapify() {
	for pos := (len(h) - 2) / 4; pos >= 0 && len(h) > 1; pos-- {
		h.down(pos, h[pos])
	}
}

// up moves node n from the hole at pos towards the root.
func (h Heap) up(pos int, n Node) {
	for pos > 0 {
		parent := (pos - 1) / 4
		if !Less(n, h[parent]) {
			break
		}
		h[pos] = h[parent]
		pos = parent
	}
	h[pos] = n
}

// down moves node n from the hole at pos towards the leaves.
func (h Heap) down(pos int, n Node) {
	for {
		first := 4*pos + 1
		if first >= len(h) {
			break
		}
		best := first
		for c := first + 1; c < min(first+4, len(h)); c++ {
			if Less(h[c], h[best]) {
				best = c
			}
		}
		if !Less(h[best], n) {
			break
		}
		h[pos] = h[best]
		pos = best
	}
	h[pos] = n
}

// Misplaced returns the first position whose node orders before its parent,
// or -1 if h is in heap order.
func (h Heap) Misplaced() int {
	for pos := 1; pos < len(h); pos++ {
		if Less(h[pos], h[(pos-1)/4]) {
			return pos
		}
	}
	return -1
}
