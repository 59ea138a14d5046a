package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func at(sec int) Moment {
	return MomentOf(time.Date(2025, 1, 1, 0, 0, sec, 0, time.UTC))
}

func TestHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Heap
	var all []Node
	for i := range 3000 {
		n := Node{At: at(rng.IntN(100)), Slot: int32(i), Gen: uint32(i)} // many ties
		all = append(all, n)
		h.Push(n)
		if i%3 == 0 {
			top := h[0]
			require.Equal(t, slices.MinFunc(all, cmp), top, "top")
			h.RemoveTop()
			all = slices.DeleteFunc(all, func(m Node) bool { return m == top })
		}
		require.Equal(t, -1, h.Misplaced(), "after push %d", i)
	}
	var got []Node
	for len(h) > 0 {
		got = append(got, h[0])
		h.RemoveTop()
	}
	slices.SortFunc(all, cmp)
	assert.Equal(t, all, got, "pop order")
}

func cmp(a, b Node) int {
	if Less(a, b) {
		return -1
	}
	if Less(b, a) {
		return 1
	}
	return 0
}

func TestHeapify(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 4, 5, 17, 1000} {
		h := make(Heap, n)
		for i := range h {
			h[i] = Node{At: at(rng.IntN(50)), Gen: uint32(i)}
		}
		h.Heapify()
		assert.Equal(t, -1, h.Misplaced(), "n=%d", n)
	}
	h := Heap{{At: at(2)}, {At: at(1)}}
	assert.Equal(t, 1, h.Misplaced())
}

func TestHeapGenWraps(t *testing.T) {
	// Ties are broken by gen with serial-number arithmetic: FIFO across the
	// 2³² wrap.
	var h Heap
	for k := range 6 {
		h.Push(Node{At: at(7), Slot: int32(k), Gen: 1<<32 - 3 + uint32(k)})
	}
	var order []int32
	for len(h) > 0 {
		order = append(order, h[0].Slot)
		h.RemoveTop()
	}
	assert.Equal(t, []int32{0, 1, 2, 3, 4, 5}, order)
}

func TestNodeIsSmall(t *testing.T) {
	assert.Equal(t, uintptr(12), unsafe.Sizeof(Moment{}))
	assert.Equal(t, uintptr(20), unsafe.Sizeof(Node{}))
}
