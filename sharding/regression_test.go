package sharding_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/sharding"
)

// Rule: New returns an error, never panics, for a Shards above MaxShards
// (a huge value used to panic in make or truncate to zero shards).
func TestNewRejectsTooManyShards(t *testing.T) {
	for _, n := range []int{sharding.MaxShards + 1, 1 << 32, 1e9, math.MaxInt} {
		cfg := newEnv().config()
		cfg.Shards = n
		var d *sharding.Dispatcher[string, string]
		var err error
		require.NotPanics(t, func() { d, err = sharding.New(cfg) }, "Shards=%d", n)
		assert.Nil(t, d)
		assert.EqualError(t, err, "sharding: Shards must be at most 65536, got "+itoa(n))
	}
	cfg := newEnv().config()
	cfg.Shards = sharding.MaxShards
	d, err := sharding.New(cfg)
	require.NoError(t, err)
	assert.Equal(t, 0, d.Len())
}

func itoa(n int) string { return fmt.Sprint(n) }

// countingSink is a logr.LogSink that counts the lines it is given.
type countingSink struct{ n *atomic.Int32 }

func (countingSink) Init(logr.RuntimeInfo)            {}
func (countingSink) Enabled(int) bool                 { return true }
func (s countingSink) Info(int, string, ...any)       { s.n.Add(1) }
func (s countingSink) Error(error, string, ...any)    { s.n.Add(1) }
func (s countingSink) WithValues(...any) logr.LogSink { return s }
func (s countingSink) WithName(string) logr.LogSink   { return s }

// Rule (Config.Logger, issue 9): a nil Logger means klog.Background(); a
// given logger is used as is, so logr.Discard() silences the dispatcher.
func TestLoggerNilMeansKlogGivenUsedAsIs(t *testing.T) {
	var buf bytes.Buffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	require.NoError(t, fs.Set("logtostderr", "false"))
	require.NoError(t, fs.Set("alsologtostderr", "false"))
	require.NoError(t, fs.Set("stderrthreshold", "FATAL"))
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.SetOutput(nil)
		_ = fs.Set("logtostderr", "true")
		_ = fs.Set("stderrthreshold", "ERROR")
	})

	// The second Run logs an error: see where it goes.
	runTwice := func(logger *logr.Logger) {
		buf.Reset()
		cfg := newEnv().config()
		cfg.Logger = logger
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d.Run(ctx)
		d.Run(ctx)
		klog.Flush()
	}
	runTwice(nil)
	assert.Contains(t, buf.String(), "Run called more than once", "nil Logger: klog.Background()")

	discard := logr.Discard() // as Config.Logger's doc says to silence a dispatcher
	runTwice(&discard)
	assert.Empty(t, buf.String(), "logr.Discard() wrote to klog")

	var n atomic.Int32
	counting := logr.New(countingSink{&n})
	runTwice(&counting)
	assert.Empty(t, buf.String(), "a given logger wrote to klog")
	assert.Equal(t, int32(1), n.Load(), "the given logger did not get the error")
}

// Friction (issue 9): an OnDrop hook that re-adds whatever it is given
// terminates. It used to recurse until the stack overflowed once the
// dispatcher stopped: the re-add was dropped at once and reported to the hook
// again. An add the dispatcher refuses is counted and logged, never passed to
// OnDrop.
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

// verboseEnvLogger makes e's logger record V(2) messages too.
func verboseEnvLogger(e *env) *logr.Logger {
	l := funcr.New(func(prefix, args string) {
		e.mu.Lock()
		e.logs = append(e.logs, prefix+" "+args)
		e.mu.Unlock()
	}, funcr.Options{Verbosity: 2})
	return &l
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

// Rule: at shutdown, an item whose handler fails because its ctx was
// cancelled is dropped as stopped (ErrStopped, counted once), not counted
// as a failed attempt, a retry, or a drop after failed attempts.
func TestHandlerFailingAtShutdownDroppedAsStopped(t *testing.T) {
	for _, maxAttempts := range []int{1, 3} {
		t.Run(fmt.Sprint("MaxAttempts=", maxAttempts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv()
				cfg := e.config()
				cfg.Retry = sharding.RetryPolicy{MaxAttempts: maxAttempts}
				cfg.HandleHigh = func(ctx context.Context, n string) error {
					e.record("H:" + n)
					<-ctx.Done()
					return ctx.Err()
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
				assert.ErrorIs(t, drops[0].Err, sharding.ErrStopped)
				assert.Equal(t, 0, drops[0].Attempts)
				assert.Equal(t, 0, e.metrics.get(e.metrics.retries, sharding.LaneHigh))
				assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneHigh))
				assert.Equal(t, 0, e.metrics.get(e.metrics.depth, sharding.LaneHigh))
				assert.NotContains(t, e.logged(), "failed attempts")
				assert.Equal(t, []string{"H:n"}, e.recorded())
			})
		})
	}
}

// Rule: an add made once the dispatcher stopped is dropped at once, and the
// log says so in words that hold both during Run's shutdown and after it.
func TestAddAfterStopLoggedAsStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Logger = verboseEnvLogger(e)
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)()
		d.AddLow("x/p")
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Contains(t, e.logged(), "Dropping item added after the dispatcher stopped")
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
