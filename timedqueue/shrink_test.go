package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

// Memory comes back when the work goes: after mass cancellation and after
// mass firing, the slab, the free list, the index and the heap shrink to the
// size of what is left (see store.shrink). The benchmarks measure the bytes
// (BenchmarkMemoryAfter); these tests check the sizes and that every schedule
// left is intact and runs as it should.

// smallFootprint checks that f is what a queue holding live schedules may
// hold at most once everything has shrunk: a quarter of its slots live or
// only a few slots, an index of at most 16/3 positions per slot, a heap no
// larger than four times what it holds, and a free list no larger than twice
// the slab.
func smallFootprint(t *testing.T, f timedqueue.Footprint, live int) {
	t.Helper()
	assert.LessOrEqual(t, f.Slots, max(256, 4*live), "slab slots: %+v", f)
	assert.LessOrEqual(t, f.Index, max(16, 16*f.Slots/3), "index slots: %+v", f)
	assert.LessOrEqual(t, f.Heap, max(256, 4*live), "heap capacity: %+v", f)
	assert.LessOrEqual(t, f.Free, max(512, 2*f.Slots), "free list: %+v", f)
}

func TestMemoryComesBackAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, keep = 100_000, 100
		clk := testingclock.NewFakeClock(t0)
		var ran atomic.Int64
		q, err := timedqueue.New(func(context.Context, string) error { ran.Add(1); return nil },
			timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		defer func() { _ = q.Shutdown(context.Background()) }()
		loc := time.FixedZone("X", 3600)
		fire := func(i int) time.Time { return t0.Add(time.Hour + time.Duration(i%997)*time.Second).In(loc) }
		for i := range n {
			require.True(t, q.AddWork(fmt.Sprint("k", i), t0, fire(i)))
		}
		full := timedqueue.FootprintOf(q)
		// Cancel in random order all but every n/keep-th key.
		rng := rand.New(rand.NewPCG(1, 2))
		compactions, slots := 0, full.Slots
		for _, i := range rng.Perm(n) {
			if i%(n/keep) != 0 {
				require.True(t, q.CancelWork(fmt.Sprint("k", i)))
				if f := timedqueue.FootprintOf(q); f.Slots < slots {
					compactions++
				}
				slots = timedqueue.FootprintOf(q).Slots
			}
		}
		require.NoError(t, timedqueue.CheckInvariants(q))
		f := timedqueue.FootprintOf(q)
		t.Logf("1e5 pending: %+v; %d left: %+v", full, keep, f)
		smallFootprint(t, f, keep)
		assert.Less(t, compactions, 20, "slab compactions: O(log n) for a steady decline")
		require.Equal(t, keep, q.Len())
		for i := 0; i < n; i += n / keep {
			w, ok := q.GetWorker(fmt.Sprint("k", i))
			require.True(t, ok, "k%d kept", i)
			assert.Equal(t, fire(i), w.FireAt)
			assert.Same(t, loc, w.FireAt.Location())
		}
		// The rest fires as it should.
		clk.Step(2 * time.Hour)
		synctest.Wait()
		assert.EqualValues(t, keep, ran.Load())
		assert.Equal(t, 0, q.Len())
		smallFootprint(t, timedqueue.FootprintOf(q), 0)
	})
}

func TestMemoryComesBackAfterFiring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 50_000
		clk := testingclock.NewFakeClock(t0)
		var ran atomic.Int64
		q, err := timedqueue.New(func(context.Context, string) error { ran.Add(1); return nil },
			timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		defer func() { _ = q.Shutdown(context.Background()) }()
		for i := range n {
			require.True(t, q.AddWork(fmt.Sprint("k", i), t0, t0.Add(time.Minute)))
		}
		clk.Step(time.Minute)
		synctest.Wait()
		require.EqualValues(t, n, ran.Load())
		require.Equal(t, 0, q.Len())
		require.NoError(t, timedqueue.CheckInvariants(q))
		f := timedqueue.FootprintOf(q)
		t.Logf("after firing %d: %+v", n, f)
		smallFootprint(t, f, 0)
	})
}

// TestShrinkDoesNotThrash takes a queue from 4096 schedules down to none and
// back, one at a time, and at every size cancels and re-adds a schedule
// twice, as a size hovering around a threshold would. The slab, the index and
// the heap resize O(log n) times in all, not at every crossing.
func TestShrinkDoesNotThrash(t *testing.T) {
	const n = 4096
	q, err := timedqueue.New(func(context.Context, string) error { return nil }, timedqueue.WithLogger(logr.Discard()))
	require.NoError(t, err)
	defer func() { _ = q.Shutdown(context.Background()) }()
	far := time.Now().Add(24 * time.Hour)
	key := func(i int) string { return fmt.Sprint("k", i) }
	for i := range n {
		q.AddWork(key(i), far, far)
	}
	var resizes, shrinks int
	prev := timedqueue.FootprintOf(q)
	observe := func() {
		f := timedqueue.FootprintOf(q)
		compacted := f.Slots < prev.Slots
		if compacted || f.Index != prev.Index || f.Pages != prev.Pages {
			resizes++
		}
		if compacted || f.Index < prev.Index || f.Pages < prev.Pages {
			shrinks++
		}
		prev = f
	}
	hover := func(live int) {
		for range 2 {
			q.CancelWork(key(live - 1))
			observe()
			q.AddWork(key(live-1), far, far)
			observe()
		}
	}
	for live := n; live > 1; live-- {
		hover(live)
		q.CancelWork(key(live - 1))
		observe()
	}
	down := resizes
	smallFootprint(t, prev, 1)
	for live := 1; live < n; live++ {
		q.AddWork(key(live), far, far)
		observe()
		hover(live + 1)
	}
	t.Logf("%d resizes (%d shrinks) down to 1, %d in all; at the end: %+v", down, shrinks, resizes, prev)
	assert.LessOrEqual(t, down, 16, "log₂(4096) index halvings and a few slab compactions")
	assert.LessOrEqual(t, resizes, 32)
	require.NoError(t, timedqueue.CheckInvariants(q))
}

// TestRunningAttemptSurvivesShrink moves the entries of a running attempt and
// of a new schedule waiting behind a withdrawn one while they are in flight:
// each attempt finds its entry again by key.
func TestRunningAttemptSurvivesShrink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		f := newFake(clk)
		q, err := timedqueue.New(f.work, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second}))
		require.NoError(t, err)
		defer func() { _ = q.Shutdown(context.Background()) }()
		fill := func() {
			for i := range 2000 {
				require.True(t, q.AddWork(fmt.Sprint("x", i), t0, t0.Add(time.Hour)))
			}
		}
		drop := func() {
			for i := range 2000 {
				require.True(t, q.CancelWork(fmt.Sprint("x", i)))
			}
		}
		// "a" runs and fails: its retry must be scheduled in its moved entry.
		// "b" runs, is cancelled (withdrawn) and re-added: the new schedule
		// waits, blocked, in a moved entry, until the attempt returns.
		gateA, gateB := f.setGate("a"), f.setGate("b")
		f.script("a", errors.New("boom"))
		fill() // a and b get the top slots
		require.True(t, q.AddWork("a", t0, t0))
		require.True(t, q.AddWork("b", t0, t0))
		synctest.Wait()
		require.False(t, q.CancelWork("b"), "withdrawn")
		require.True(t, q.AddWork("b", t0, t0.Add(time.Second)))
		slots := timedqueue.FootprintOf(q).Slots
		drop()
		require.Less(t, timedqueue.FootprintOf(q).Slots, slots, "entries moved")
		require.NoError(t, timedqueue.CheckInvariants(q))
		close(gateA)
		close(gateB)
		synctest.Wait()
		w, ok := q.GetWorker("a")
		require.True(t, ok)
		assert.Equal(t, 1, w.Attempts)
		assert.Equal(t, t0.Add(time.Second), w.NextAttempt)
		w, ok = q.GetWorker("b")
		require.True(t, ok)
		assert.Equal(t, t0.Add(time.Second), w.FireAt)
		assert.False(t, w.Running)
		f.mu.Lock()
		delete(f.gates, "a")
		delete(f.gates, "b")
		f.mu.Unlock()
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, 0, q.Len())
		assert.ElementsMatch(t, []run{{"a", 0}, {"b", 0}, {"a", time.Second}, {"b", time.Second}}, f.takeRuns())
		f.noOverlap(t)
		require.NoError(t, timedqueue.CheckInvariants(q))
	})
}

// TestModelShrinking runs the model with padding schedules added and
// cancelled in turn, so that the store shrinks again and again, moving the
// entries of running, backing-off, blocked and far-time schedules.
func TestModelShrinking(t *testing.T) {
	for _, seed := range []uint64{31, 32, 33} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, seed, 3000, 40, t0, false, 1200) })
		})
	}
	t.Run("far times", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { runModel(t, 34, 3000, 40, t0, true, 1200) })
	})
}
