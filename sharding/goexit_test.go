package sharding_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/sharding"
)

// Rule: a handler that calls runtime.Goexit, as t.FailNow does, does not end
// its shard's worker for good. The attempt fails like a returned error
// (retried, then reported) and the shard goes on handling its items.
func TestHandlerGoexitFailsAttemptAndShardGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second}
		cfg.HandleLow = func(_ context.Context, p string) error {
			e.record("L:" + p)
			if p == "x/bad" {
				runtime.Goexit()
			}
			return nil
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		// Queued before Run, so the order is fixed: high first, then FIFO.
		d.AddLow("x/bad")
		d.AddLow("x/p1")
		d.AddHigh("x")
		stop := run(t, d)
		synctest.Wait()
		assert.Equal(t, []string{"H:x", "L:x/bad", "L:x/p1"}, e.recorded(), "the shard stopped after the Goexit")
		assert.Equal(t, 1, e.metrics.get(e.metrics.retries, sharding.LaneLow))

		e.clk.Step(time.Second) // x/bad's retry is due
		synctest.Wait()
		d.AddLow("x/p2")
		synctest.Wait()
		assert.Equal(t, []string{"H:x", "L:x/bad", "L:x/p1", "L:x/bad", "L:x/p2"}, e.recorded())

		drops := e.dropped()
		require.Len(t, drops, 1, "x/bad reported after its last attempt")
		assert.Equal(t, "x/bad", drops[0].Low)
		assert.Equal(t, 2, drops[0].Attempts)
		assert.ErrorIs(t, drops[0].Err, sharding.ErrGoexit)
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Equal(t, 0, d.Len())
		stop()
		assert.Len(t, e.dropped(), 1, "nothing left to drop at shutdown")
	})
}

// A Goexit in the OnDrop hook, called on the worker after an item's last
// attempt, does not stop the shard either, however that attempt failed.
func TestGoexitInOnDropOnWorkerShardGoesOn(t *testing.T) {
	for _, how := range []string{"error", "panic", "Goexit"} {
		t.Run("handler "+how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv()
				cfg := e.config()
				cfg.Retry = sharding.RetryPolicy{MaxAttempts: 1}
				cfg.HandleLow = func(_ context.Context, p string) error {
					e.record("L:" + p)
					if p == "x/bad" {
						switch how {
						case "panic":
							panic("failed")
						case "Goexit":
							runtime.Goexit()
						}
						return errors.New("failed")
					}
					return nil
				}
				var drops atomic.Int32
				cfg.OnDrop = func(sharding.Drop[string, string]) {
					drops.Add(1)
					runtime.Goexit()
				}
				d, err := sharding.New(cfg)
				require.NoError(t, err)
				d.AddLow("x/bad")
				d.AddLow("x/p1")
				run(t, d)
				synctest.Wait()
				d.AddLow("x/p2")
				synctest.Wait()
				assert.Equal(t, []string{"L:x/bad", "L:x/p1", "L:x/p2"}, e.recorded())
				assert.Equal(t, int32(1), drops.Load())
				assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
			})
		})
	}
}

// Run waits for the handlers of a worker that replaced one ended by Goexit,
// as for any other: the return of every handler happens before Run returns.
func TestRunWaitsForHandlersAfterGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		var returned atomic.Bool
		cfg.HandleLow = func(ctx context.Context, p string) error {
			e.record("L:" + p)
			if p == "x/bad" {
				runtime.Goexit()
			}
			<-ctx.Done()
			<-e.clk.After(time.Second) // a handler that takes time to give up
			returned.Store(true)
			return nil
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		d.AddLow("x/bad")
		d.AddLow("x/slow")
		ctx, cancel := context.WithCancel(context.Background())
		runReturned := make(chan struct{})
		go func() { d.Run(ctx); close(runReturned) }()
		synctest.Wait()
		assert.Equal(t, []string{"L:x/bad", "L:x/slow"}, e.recorded())
		cancel()
		synctest.Wait()
		select {
		case <-runReturned:
			t.Fatal("Run returned while a handler was still running")
		default:
		}
		e.clk.Step(time.Second)
		<-runReturned
		assert.True(t, returned.Load())
		drops := e.dropped()
		require.Len(t, drops, 1, "x/bad, waiting for its retry at shutdown")
		assert.Equal(t, "x/bad", drops[0].Low)
		assert.Equal(t, 1, drops[0].Attempts)
		assert.ErrorIs(t, drops[0].Err, sharding.ErrStopped)
	})
}

// A handler that calls Goexit once Run's context is done is treated like one
// that fails then: not counted as an attempt, dropped as stopped.
func TestGoexitAtShutdownDroppedAsStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.HandleHigh = func(ctx context.Context, n string) error {
			e.record("H:" + n)
			<-ctx.Done()
			runtime.Goexit()
			return nil
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		stop := run(t, d)
		d.AddHigh("n")
		synctest.Wait()
		stop()
		drops := e.dropped()
		require.Len(t, drops, 1)
		assert.Equal(t, "n", drops[0].High)
		assert.Equal(t, 0, drops[0].Attempts)
		assert.ErrorIs(t, drops[0].Err, sharding.ErrStopped)
		assert.Equal(t, 0, e.metrics.get(e.metrics.retries, sharding.LaneHigh))
		assert.Equal(t, 0, e.metrics.get(e.metrics.depth, sharding.LaneHigh))
	})
}
