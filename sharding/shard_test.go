package sharding

import (
	"math/rand/v2"
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
		assert.LessOrEqual(t, len(q.buf), minRing, "buffer did not shrink")
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

func TestBackoff(t *testing.T) {
	p := RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}.withDefaults()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		assert.Equal(t, w, p.backoff(i+1), "backoff(%d)", i+1)
	}
	huge := RetryPolicy{InitialBackoff: time.Hour, MaxBackoff: 1<<63 - 1}.withDefaults()
	assert.Equal(t, time.Duration(1<<63-1), huge.backoff(200), "must cap, not overflow")

	def := RetryPolicy{}.withDefaults()
	assert.Equal(t, RetryPolicy{MaxAttempts: DefaultMaxAttempts, InitialBackoff: DefaultInitialBackoff, MaxBackoff: DefaultMaxBackoff}, def)
	big := RetryPolicy{InitialBackoff: 2 * time.Hour}.withDefaults()
	assert.Equal(t, 2*time.Hour, big.MaxBackoff, "zero MaxBackoff below InitialBackoff takes InitialBackoff")
}

// TestBackoffWithOnlyMaxBackoff pins the documented defaults when only
// MaxBackoff is set: InitialBackoff is min(DefaultInitialBackoff, MaxBackoff).
func TestBackoffWithOnlyMaxBackoff(t *testing.T) {
	small := RetryPolicy{MaxBackoff: 100 * time.Millisecond}.withDefaults()
	assert.Equal(t, 100*time.Millisecond, small.InitialBackoff)
	for i := 1; i <= 4; i++ {
		assert.Equal(t, 100*time.Millisecond, small.backoff(i), "backoff(%d)", i)
	}
	large := RetryPolicy{MaxBackoff: 5 * time.Second}.withDefaults()
	assert.Equal(t, DefaultInitialBackoff, large.InitialBackoff)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second},
		[]time.Duration{large.backoff(1), large.backoff(2), large.backoff(3), large.backoff(4)})
}

// TestLaneMapShrinks checks that a lane's map of item states is replaced
// once it holds less than a quarter of its peak (Go maps never shrink), that
// a number of items hovering around that point does not replace it again and
// again, and that the items left keep their state.
func TestLaneMapShrinks(t *testing.T) {
	var l lane[int]
	const n = 100_000
	for i := range n {
		require.True(t, l.add(i))
	}
	require.Equal(t, n, l.peak)
	// Handle all but the last 100 (in FIFO order), failing every tenth.
	fails := 0
	for i := range n - 100 {
		item := l.pop()
		require.Equal(t, i, item)
		failed := i%10 == 0
		if failed {
			fails++
		}
		l.done(item, failed, false, 3, uint64(i))
	}
	assert.Equal(t, 100+fails, len(l.items))
	assert.LessOrEqual(t, l.peak, 4*len(l.items)+minMapShrink, "map not replaced: peak %d for %d items", l.peak, len(l.items))
	st := l.items[10]
	assert.Equal(t, itemState{phase: phaseWaiting, attempts: 1, gen: 10}, st, "state kept across the replacement")
	assert.True(t, l.retryDue(10, 10))

	// Hover: add and handle one item at a time around the threshold.
	replaced := 0
	prev := l.peak
	for i := range 10_000 {
		l.add(n + i)
		item := l.pop()
		l.done(item, false, false, 3, 0)
		if l.peak != prev {
			replaced++
			prev = l.peak
		}
	}
	assert.LessOrEqual(t, replaced, 2, "map replaced %d times while hovering", replaced)
}
