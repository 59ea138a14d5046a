package sched

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlabSlotsAreStable(t *testing.T) {
	var sl Slab[string]
	const n = 3*slabPage + 5
	for i := range n {
		s := sl.Alloc()
		require.Equal(t, int32(i), s)
		*sl.At(s) = string(rune('a' + i%26))
	}
	p := sl.At(7) // pages never move
	assert.Equal(t, n, sl.Len())
	pages, _ := sl.Footprint()
	assert.Equal(t, 4, pages)
	for i := range n {
		assert.Equal(t, string(rune('a'+i%26)), *sl.At(int32(i)))
	}
	sl.Free(7)
	sl.Free(2000)
	assert.Empty(t, *p, "freed slots are zeroed")
	assert.Equal(t, int32(2000), sl.Alloc(), "last freed first")
	assert.Equal(t, int32(7), sl.Alloc())
	assert.Equal(t, int32(n), sl.Alloc())
	assert.Same(t, p, sl.At(7))
}

func TestSlabFirstPageGrows(t *testing.T) {
	var sl Slab[int64]
	for range 9 {
		sl.Alloc()
	}
	assert.Equal(t, 16, len(sl.pages[0]), "doubled from 8")
	for range slabPage {
		sl.Alloc()
	}
	assert.Equal(t, slabPage, len(sl.pages[0]))
	assert.Len(t, sl.pages, 2)
}
