package sharding

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLaneGivesMemoryBack: after a mass of items is handled while a few wait
// for a retry, the lane's map must not keep the mass's memory; and a lane
// whose size then hovers around the rebuild threshold must not rebuild (and
// allocate) at every step.
func TestLaneGivesMemoryBack(t *testing.T) {
	const n, stuck = 200_000, 3
	var l lane[int]
	base := heapAfterGC()
	for i := range n {
		queued, _ := l.add(i)
		require.True(t, queued)
	}
	full := heapAfterGC()
	for range n {
		item := l.pop()
		if item < stuck {
			out, _ := l.done(item, true, false, RetryPolicy{MaxAttempts: 5}, 1)
			require.Equal(t, outcomeRetry, out)
		} else {
			out, _ := l.done(item, false, false, RetryPolicy{MaxAttempts: 5}, 0)
			require.Equal(t, outcomeDone, out)
		}
	}
	require.Len(t, l.items, stuck)
	for i := range stuck {
		assert.Equal(t, phaseWaiting, l.items[i].phase, "item %d lost in a rebuild", i)
	}
	left := heapAfterGC()
	t.Logf("heap: %d KiB with %d items, %d KiB with %d left", (full-base)>>10, n, int64(left-base)>>10, stuck)
	assert.Less(t, int64(left)-int64(base), int64(full-base)/100, "the lane kept the memory of its peak")

	// Hover: one item in, one out, around a quarter of a fresh peak.
	var h lane[int]
	for i := range 4 * laneRebuildAt {
		h.add(i)
	}
	for range 3 * laneRebuildAt {
		h.done(h.pop(), false, false, RetryPolicy{MaxAttempts: 5}, 0)
	}
	next := 4 * laneRebuildAt
	allocs := testing.AllocsPerRun(10_000, func() {
		h.add(next)
		next++
		h.done(h.pop(), false, false, RetryPolicy{MaxAttempts: 5}, 0)
	})
	assert.Less(t, allocs, 0.01, "a lane hovering around its threshold rebuilds at every step")
	runtime.KeepAlive(&l)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
