package sharding

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRingFollowsModel checks ring against a slice FIFO under random pushes
// and pops, and that its buffer shrinks back as it empties.
func TestRingFollowsModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var q ring[int]
	var model []int
	next := 0
	for round := range 4 {
		// Grow to ~10k, then drain, with noise.
		for q.len() < 10_000 {
			if r.IntN(4) == 0 && q.len() > 0 {
				require.Equal(t, model[0], q.pop())
				model = model[1:]
			} else {
				q.push(next)
				model = append(model, next)
				next++
			}
		}
		for q.len() > 0 {
			if r.IntN(4) == 0 {
				q.push(next)
				model = append(model, next)
				next++
			}
			require.Equal(t, model[0], q.pop(), "round %d", round)
			model = model[1:]
		}
		assert.LessOrEqual(t, len(q.buf), keepRing, "buffer did not shrink")
	}
}

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
			out, _ := l.done(item, true, false, 5, 1)
			require.Equal(t, outcomeRetry, out)
		} else {
			out, _ := l.done(item, false, false, 5, 0)
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
		h.done(h.pop(), false, false, 5, 0)
	}
	next := 4 * laneRebuildAt
	allocs := testing.AllocsPerRun(10_000, func() {
		h.add(next)
		next++
		h.done(h.pop(), false, false, 5, 0)
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

// A ring whose length goes between a few items and a few more (a worker
// keeping up with its adds) must not allocate a buffer every few operations.
func TestRingSmallHoverDoesNotAllocate(t *testing.T) {
	var q ring[int]
	for i := range 100 {
		q.push(i)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range 10 {
			q.push(i)
		}
		for range 10 {
			q.pop()
		}
		for q.len() > 3 {
			q.pop()
		}
		for q.len() < 12 {
			q.push(0)
		}
	})
	assert.Zero(t, allocs)
}

// TestPickHonoursPriorityAndBurst drives one shard's lanes with random adds
// and picks, as workLoop does under the shard's mutex, and checks each pick
// against the contract: a high item whenever one is queued, except that after
// MaxHighBurst high items in a row while low items waited, one low item.
func TestPickHonoursPriorityAndBurst(t *testing.T) {
	for _, burst := range []int{0, 1, 3} {
		r := rand.New(rand.NewPCG(uint64(burst), 7))
		var s shard[int, int]
		inARow, next, lows := 0, 0, 0
		for range 20_000 {
			if r.IntN(2) == 0 {
				next++
				if r.IntN(3) == 0 {
					s.hi.add(next)
				} else {
					s.lo.add(next)
				}
				continue
			}
			high, low := s.hi.q.len(), s.lo.q.len()
			picked, ok := s.pick(burst)
			require.Equal(t, high+low > 0, ok, "pick with %d high, %d low queued", high, low)
			switch {
			case !ok:
			case picked == LaneHigh:
				require.Positive(t, high)
				if low > 0 {
					require.False(t, burst > 0 && inARow >= burst, "burst %d: high item %d in a row while low items waited", burst, inARow+1)
					inARow++
				} else {
					inARow = 0
				}
				s.hi.pop()
			default:
				require.Positive(t, low)
				require.False(t, high > 0 && (burst == 0 || inARow < burst), "burst %d: a low item with %d high queued after %d high in a row", burst, high, inARow)
				inARow = 0
				lows++
				s.lo.pop()
			}
		}
		assert.Greater(t, lows, 100, "burst %d: low items were picked", burst)
	}
}
