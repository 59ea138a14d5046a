package sharding

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetryHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var h retryHeap[int]
	for i := range 5000 {
		h.push(retryEntry[int]{due: base.Add(time.Duration(r.IntN(100)) * time.Second), seq: uint64(i), item: i})
	}
	prev := h.pop()
	for len(h) > 0 {
		e := h.pop()
		require.False(t, e.before(&prev), "heap popped %v before %v", prev, e)
		prev = e
	}
	assert.LessOrEqual(t, cap(h), 64, "heap storage not released")
}
