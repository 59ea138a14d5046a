package timedqueue_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/timedqueue"
)

func TestConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t, timedqueue.WithMaxConcurrency(4))
		const n = 200
		for i := range n {
			key := fmt.Sprint(i)
			f.script(key, errors.New("fail once")) // every schedule runs twice
			q.AddWork(key, t0, t0.Add(time.Duration(i%7)*time.Millisecond))
		}
		base := runtime.NumGoroutine()
		step(clk, time.Minute)
		step(clk, time.Minute)
		runs := f.takeRuns()
		assert.Len(t, runs, 2*n)
		count := map[string]int{}
		for _, r := range runs {
			count[r.key]++
		}
		for i := range n {
			assert.Equal(t, 2, count[fmt.Sprint(i)], "key %d", i)
		}
		f.mu.Lock()
		assert.LessOrEqual(t, f.peak, 4)
		f.mu.Unlock()
		assert.LessOrEqual(t, runtime.NumGoroutine(), base, "idle workers exit")
		assert.Equal(t, 0, q.Len())
	})
}

// With an attempt timeout every call pumps in full (no fast path): due work
// beyond MaxConcurrency still waits for a slot.
func TestConcurrencyLimitWithAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t, timedqueue.WithMaxConcurrency(2), timedqueue.WithAttemptTimeout(time.Hour))
		gates := map[string]chan struct{}{}
		for _, k := range []string{"a", "b", "c", "d"} {
			gates[k] = f.setGate(k)
			require.True(t, q.AddWork(k, t0, t0))
			synctest.Wait()
		}
		assert.Len(t, f.takeRuns(), 2, "started with two slots")
		close(gates["a"])
		synctest.Wait()
		assert.Equal(t, []run{{"c", 0}}, f.takeRuns(), "a slot freed: the next in order starts")
		clk.Step(time.Minute)
		synctest.Wait()
		assert.Empty(t, f.takeRuns())
		f.mu.Lock()
		assert.Equal(t, 2, f.peak)
		f.mu.Unlock()
	})
}

func TestConcurrencySlotsPeakWithBlockedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f, q, _ := setup(t, timedqueue.WithMaxConcurrency(3))
		gates := make([]chan struct{}, 10)
		for i := range 10 {
			gates[i] = f.setGate(fmt.Sprint(i))
			q.AddWork(fmt.Sprint(i), t0, t0)
		}
		synctest.Wait()
		assert.Len(t, f.takeRuns(), 3)
		// A withdrawn attempt keeps its slot until it returns.
		q.CancelWork("0")
		synctest.Wait()
		assert.Empty(t, f.takeRuns())
		close(gates[0])
		synctest.Wait()
		assert.Equal(t, []run{{"3", 0}}, f.takeRuns())
		for _, g := range gates[1:] {
			close(g)
		}
		synctest.Wait()
		assert.Len(t, f.takeRuns(), 6)
		f.mu.Lock()
		assert.Equal(t, 3, f.peak)
		for k := range f.gates {
			delete(f.gates, k)
		}
		f.mu.Unlock()
	})
}

func TestFireAtOrderUnderLimitOfOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t, timedqueue.WithMaxConcurrency(1))
		offsets := []int{5, 3, 9, 1, 3, 7, 0, 3, 8, 2}
		for i, o := range offsets {
			q.AddWork(fmt.Sprintf("k%d", i), t0, t0.Add(time.Duration(o)*time.Second))
		}
		step(clk, time.Minute) // all due at once
		var got []string
		for _, r := range f.takeRuns() {
			got = append(got, r.key)
		}
		// FireAt order; ties (3s) in the order they were added.
		assert.Equal(t, []string{"k6", "k3", "k9", "k1", "k4", "k7", "k0", "k5", "k8", "k2"}, got)
	})
}
