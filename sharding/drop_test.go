package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/sharding"
)

// Rule: an OnDrop hook that re-adds whatever it is given terminates, also
// once the dispatcher stopped, when each re-add is refused at once: an add
// the dispatcher refuses is counted and logged, never passed to OnDrop,
// where it would recurse until the stack overflowed.
func TestOnDropAlwaysReaddingTerminates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Logger = verboseEnvLogger(e)
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: 1}
		g := newGate("block")
		e.gated(&cfg, g)
		var failed atomic.Bool
		cfg.HandleLow = func(_ context.Context, p string) error {
			e.record("L:" + p)
			if !failed.Swap(true) {
				return errors.New("first attempt fails")
			}
			return nil
		}
		var d *sharding.Dispatcher[string, string]
		var depth, maxDepth atomic.Int32
		var reported []string
		cfg.OnDrop = func(drop sharding.Drop[string, string]) {
			n := depth.Add(1)
			defer depth.Add(-1)
			maxDepth.Store(max(maxDepth.Load(), n))
			reported = append(reported, drop.Low)
			if n > 10 {
				return // recursing: stop well before the stack overflows
			}
			if drop.Lane == sharding.LaneHigh {
				d.AddHigh(drop.High)
			} else {
				d.AddLow(drop.Low)
			}
		}
		var err error
		d, err = sharding.New(cfg)
		require.NoError(t, err)
		stop := run(t, d)

		d.AddLow("x/p")
		synctest.Wait()
		assert.Equal(t, []string{"L:x/p", "L:x/p"}, e.recorded(), "re-added after its drop, handled again")
		d.AddHigh("block")
		d.AddLow("q/p") // queued behind block: dropped at shutdown
		synctest.Wait()
		stop()
		d.AddLow("y/p") // after Run returned: refused, not reported
		assert.Equal(t, int32(1), maxDepth.Load(), "OnDrop re-entered itself")
		assert.Equal(t, []string{"x/p", "q/p"}, reported)
		// x/p after its attempt, q/p at shutdown, the hook's re-add of q/p, y/p.
		assert.Equal(t, 4, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Equal(t, 2, strings.Count(e.logged(), "Dropping item added after the dispatcher stopped"))
		assert.Equal(t, 0, d.Len())
	})
}

// The same holds for the other adds the dispatcher refuses: an item that is
// not equal to itself, or whose key func panics, is counted and logged, not
// passed to OnDrop, where re-adding it would recurse without end.
func TestOnDropNotCalledForRefusedAdds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.LowKey = func(p string) string {
			if p == "bad-key" {
				panic("key exploded")
			}
			return keyOf(p)
		}
		var d *sharding.Dispatcher[string, string]
		var depth, maxDepth atomic.Int32
		cfg.OnDrop = func(drop sharding.Drop[string, string]) {
			n := depth.Add(1)
			defer depth.Add(-1)
			maxDepth.Store(max(maxDepth.Load(), n))
			if n <= 10 { // recursing: stop well before the stack overflows
				d.AddLow(drop.Low)
			}
		}
		var err error
		d, err = sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddLow("bad-key")
		synctest.Wait()
		assert.Equal(t, int32(0), maxDepth.Load(), "OnDrop called for a refused add")
		assert.Contains(t, e.logged(), "key exploded")
		assert.Contains(t, e.logged(), "goroutine", "stack logged")
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Empty(t, e.recorded())
	})
}

// An item that is not equal to itself (NaN) or not comparable (an interface
// holding a slice) could never be found again in the dispatcher's maps: it is
// dropped at once, logged with ErrInvalidItem and counted, without a panic,
// and nothing else is disturbed.
func TestInvalidItemsAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs []string
		logger := funcr.New(func(_, args string) { logs = append(logs, args) }, funcr.Options{})
		metrics := newFakeMetrics()
		onDrop := 0
		handled := make(chan any, 4)
		d, err := sharding.New(sharding.Config[any, float64]{
			Shards:     2,
			HighKey:    func(h any) string { return fmt.Sprint(h) },
			LowKey:     func(l float64) string { return fmt.Sprint(l) },
			HandleHigh: func(_ context.Context, h any) error { handled <- h; return nil },
			HandleLow:  func(_ context.Context, l float64) error { handled <- l; return nil },
			Logger:     &logger,
			Metrics:    metrics,
			OnDrop:     func(sharding.Drop[any, float64]) { onDrop++ },
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { d.Run(ctx); close(stopped) }()

		d.AddLow(math.NaN())
		d.AddHigh([]int{1})
		d.AddHigh(math.NaN())
		d.AddHigh("node-a")
		synctest.Wait()
		assert.Equal(t, 0, d.Len())
		assert.Equal(t, 2, metrics.get(metrics.drops, sharding.LaneHigh))
		assert.Equal(t, 1, metrics.get(metrics.drops, sharding.LaneLow))
		require.Len(t, logs, 3)
		for _, l := range logs {
			assert.Contains(t, l, sharding.ErrInvalidItem.Error())
		}
		assert.Zero(t, onDrop, "refused adds are not passed to OnDrop")
		assert.Equal(t, "node-a", <-handled)
		cancel()
		<-stopped
	})
}

// Rule: nothing fails silently. A failed attempt whose retry is superseded
// by an add made while it ran is logged (V(2)), though it is not retried.
func TestFailureSupersededByReaddIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Logger = verboseEnvLogger(e)
		var d *sharding.Dispatcher[string, string]
		var calls atomic.Int32
		cfg.HandleLow = func(_ context.Context, p string) error {
			e.record("L:" + p)
			if calls.Add(1) == 1 {
				d.AddLow(p) // re-added while running
				return errors.New("superseded failure")
			}
			return nil
		}
		var err error
		d, err = sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddLow("x/p")
		synctest.Wait()
		assert.Equal(t, []string{"L:x/p", "L:x/p"}, e.recorded())
		assert.Contains(t, e.logged(), "superseded failure")
		assert.Equal(t, 0, e.metrics.get(e.metrics.retries, sharding.LaneLow))
	})
}
