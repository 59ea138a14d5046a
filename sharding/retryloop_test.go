package sharding_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/sharding"
)

// Rules: strict priority, and "when due, the item is queued at the back of
// its lane". A high retry that came due while a low item was being handled
// is taken before the next queued low item, even though no other goroutine
// has queued it yet when the worker picks.
func TestDueHighRetryTakenBeforeQueuedLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{InitialBackoff: time.Second}
		var highCalls atomic.Int32
		cfg.HandleHigh = func(_ context.Context, n string) error {
			e.record("H:" + n)
			if highCalls.Add(1) == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}
		g := newGate("n/l1")
		cfg.HandleLow = func(ctx context.Context, p string) error {
			e.record("L:" + p)
			if p == "n/l1" {
				g.wait(ctx, p)
				e.clk.Step(time.Second) // n's retry is due now
			}
			return nil
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddHigh("n") // fails at t0: retry due at t0+1s
		synctest.Wait()
		d.AddLow("n/l1")
		synctest.Wait()
		d.AddLow("n/l2")
		g.release("n/l1")
		synctest.Wait()
		assert.Equal(t, []string{"H:n", "L:n/l1", "H:n", "L:n/l2"}, e.recorded())
	})
}

// Rule: FIFO within a lane. A low item added after a low retry came due is
// queued behind the retried item, even when the add comes before any other
// goroutine has queued the retry.
func TestAddAfterRetryDueQueuesBehindIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{InitialBackoff: time.Second}
		var failed atomic.Bool
		cfg.HandleLow = func(_ context.Context, p string) error {
			e.record("L:" + p)
			if p == "x/p" && !failed.Swap(true) {
				return errors.New("first attempt fails")
			}
			return nil
		}
		var d *sharding.Dispatcher[string, string]
		g := newGate("block")
		cfg.HandleHigh = func(ctx context.Context, n string) error {
			e.record("H:" + n)
			e.clk.Step(time.Second) // x/p's retry is due now
			d.AddLow("b/p")
			g.wait(ctx, n)
			return nil
		}
		var err error
		d, err = sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddLow("x/p") // fails at t0: retry due at t0+1s
		synctest.Wait()
		d.AddHigh("block")
		synctest.Wait()
		g.release("block")
		synctest.Wait()
		assert.Equal(t, []string{"L:x/p", "H:block", "L:x/p", "L:b/p"}, e.recorded())
	})
}

// stepWhileArming is a FakeClock on which another goroutine's Step lands
// between the retry loop's reading of Now and its NewTimer, once.
type stepWhileArming struct {
	*testingclock.FakeClock
	step atomic.Int64
}

func (c *stepWhileArming) NewTimer(d time.Duration) clock.Timer {
	if s := c.step.Swap(0); s != 0 {
		c.FakeClock.Step(time.Duration(s))
	}
	return c.FakeClock.NewTimer(d)
}

// Rule: a retry is queued when its backoff has passed on the injected clock,
// not later, even if a small Step races with the arming of the retry timer.
func TestRetryRunsAtDueTimeDespiteStepWhileArming(t *testing.T) {
	for _, step := range []time.Duration{time.Nanosecond, time.Millisecond, 500 * time.Millisecond} {
		t.Run(step.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv()
				clk := &stepWhileArming{FakeClock: e.clk}
				cfg := e.config()
				cfg.Clock = clk
				cfg.Retry = sharding.RetryPolicy{InitialBackoff: time.Second}
				var calls atomic.Int32
				cfg.HandleLow = func(context.Context, string) error {
					if calls.Add(1) == 1 {
						return errors.New("first attempt fails")
					}
					return nil
				}
				d, err := sharding.New(cfg)
				require.NoError(t, err)
				run(t, d)
				synctest.Wait()

				clk.step.Store(int64(step))
				d.AddLow("x/p") // fails at t0: due at t0+1s
				synctest.Wait()
				e.clk.Step(time.Second - step - time.Nanosecond)
				synctest.Wait()
				require.Equal(t, int32(1), calls.Load(), "retried early")
				e.clk.Step(time.Nanosecond) // t0+1s: due
				synctest.Wait()
				assert.Equal(t, int32(2), calls.Load(), "retry due at t0+1s did not run at t0+1s")
			})
		})
	}
}
