package timedqueue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

func TestShutdown(t *testing.T) {
	t.Run("drops pending, cancels running, waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			m := newCountingProvider()
			started := make(chan struct{})
			release := make(chan struct{})
			var cause error
			q, err := timedqueue.New(func(ctx context.Context, k string) error {
				close(started)
				<-ctx.Done()
				cause = context.Cause(ctx)
				<-release
				return ctx.Err()
			}, timedqueue.WithClock(clk), timedqueue.WithMetricsProvider(m), timedqueue.WithLogger(logr.Discard()))
			require.NoError(t, err)
			q.AddWork("running", t0, t0)
			<-started
			f := newFake(clk)
			_ = f
			q.AddWork("pending", t0, t0.Add(time.Second))
			q.AddWork("backing-off", t0, t0.Add(2*time.Second))
			returned := make(chan error)
			go func() { returned <- q.Shutdown(context.Background()) }()
			synctest.Wait()
			select {
			case <-returned:
				t.Fatal("Shutdown returned before the running work func")
			default:
			}
			assert.Equal(t, timedqueue.ErrShutdown, cause)
			assert.False(t, q.AddWork("new", t0, t0), "Add after Shutdown")
			assert.False(t, q.UpdateWork("new", t0, t0), "Update after Shutdown")
			assert.Equal(t, 1, q.Len(), "only the running schedule is left")
			close(release)
			require.NoError(t, <-returned)
			assert.Equal(t, 0, q.Len(), "a failed attempt after Shutdown is not retried")
			step(clk, time.Hour)
			assert.Equal(t, 2, m.get("drops"))
			assert.Equal(t, 1, m.get("failures"))
			assert.Equal(t, 0, m.get("depth"))
			assert.Equal(t, 0, m.get("running"))
			require.NoError(t, q.Shutdown(context.Background()), "idempotent")
			assert.Equal(t, 0, clk.Waiters())
		})
	})
	t.Run("honours its deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			release := make(chan struct{})
			q, err := timedqueue.New(func(ctx context.Context, k string) error {
				<-release // ignores ctx
				return nil
			}, timedqueue.WithClock(clk))
			require.NoError(t, err)
			q.AddWork("a", t0, t0)
			synctest.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second) // synctest's fake time
			defer cancel()
			assert.ErrorIs(t, q.Shutdown(ctx), context.DeadlineExceeded)
			close(release)
			assert.NoError(t, q.Shutdown(context.Background()), "called again, it waits")
		})
	})
	t.Run("from inside a work func", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			var q *timedqueue.TimedWorkerQueue[string]
			otherDone := false
			var mu sync.Mutex
			shut := make(chan error, 2)
			q, err := timedqueue.New(func(ctx context.Context, k string) error {
				switch k {
				case "self", "self2":
					shut <- q.Shutdown(ctx)
				case "other":
					<-ctx.Done()
					mu.Lock()
					otherDone = true
					mu.Unlock()
				}
				return nil
			}, timedqueue.WithClock(clk))
			require.NoError(t, err)
			q.AddWork("other", t0, t0)
			q.AddWork("self", t0, t0)
			q.AddWork("self2", t0, t0)
			require.NoError(t, <-shut)
			require.NoError(t, <-shut)
			mu.Lock()
			assert.True(t, otherDone, "Shutdown from inside waits for the other work funcs")
			mu.Unlock()
			require.NoError(t, q.Shutdown(context.Background()))
		})
	})
}

// A work func shuts the queue down by passing its own ctx; with an unrelated
// ctx Shutdown waits for its own caller and returns that ctx's error (the
// documented limit).
func TestShutdownFromWorkFunc(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run(fmt.Sprint("own ctx=", own), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(t0)
				var q *timedqueue.TimedWorkerQueue[string]
				got := make(chan error, 1)
				q, err := timedqueue.New(func(ctx context.Context, _ string) error {
					if !own {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
						defer cancel()
					}
					got <- q.Shutdown(ctx)
					return nil
				}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
				require.NoError(t, err)
				q.AddWork("a", t0, t0)
				if own {
					assert.NoError(t, <-got)
				} else {
					assert.ErrorIs(t, <-got, context.DeadlineExceeded)
				}
				require.NoError(t, q.Shutdown(context.Background()))
			})
		})
	}
}

// assertBlocked fails the test, and lets it go on to release the work, if a
// value is ready on ch; it puts the value back.
func assertBlocked(t *testing.T, ch chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Errorf("%s returned %v while another work func was still running", what, err)
		ch <- err
	default:
	}
}

// A work func's ctx that reaches Shutdown after that work func returned (from
// a goroutine it started) belongs to no running attempt: Shutdown waits for
// every running work func.
func TestShutdownWithTheCtxOfAReturnedWorkFuncWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		release := make(chan struct{})
		kept := make(chan context.Context, 1)
		q, err := timedqueue.New(func(ctx context.Context, k string) error {
			switch k {
			case "short":
				kept <- ctx // returns at once; its ctx outlives it
			case "long":
				<-release // ignores its ctx
			}
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		require.True(t, q.AddWork("long", t0, t0))
		require.True(t, q.AddWork("short", t0, t0))
		ctx := <-kept
		synctest.Wait() // "short" has returned; "long" runs

		shut := make(chan error, 1)
		go func() { shut <- q.Shutdown(ctx) }()
		synctest.Wait()
		assertBlocked(t, shut, "Shutdown(ctx of a returned work func)")
		close(release)
		require.NoError(t, <-shut)
	})
}

// Several goroutines of one work func pass its ctx to Shutdown: they skip that
// work func only, once, and wait for the others.
func TestShutdownFromGoroutinesSharingAWorkCtx(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("attempt timeout=", timeout), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(t0)
				var q *timedqueue.TimedWorkerQueue[string]
				release := make(chan struct{})
				shut := make(chan error, 3)
				q, err := timedqueue.New(func(ctx context.Context, k string) error {
					switch k {
					case "self":
						inner := make(chan error, 2)
						for range 2 {
							go func() { inner <- q.Shutdown(ctx) }()
						}
						shut <- <-inner
						shut <- <-inner
					case "other":
						<-release // ignores its ctx
					}
					return nil
				}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()), timedqueue.WithAttemptTimeout(timeout))
				require.NoError(t, err)
				require.True(t, q.AddWork("other", t0, t0))
				require.True(t, q.AddWork("self", t0, t0))
				synctest.Wait()
				assertBlocked(t, shut, "Shutdown(ctx shared by two goroutines)")
				close(release)
				require.NoError(t, <-shut)
				require.NoError(t, <-shut)
				require.NoError(t, q.Shutdown(context.Background()))
			})
		})
	}
}

// Two work funcs that both shut the queue down from inside do not wait for
// each other (that would deadlock), but both wait for a third work func.
func TestShutdownFromTwoWorkFuncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var q *timedqueue.TimedWorkerQueue[string]
		release := make(chan struct{})
		shut := make(chan error, 2)
		q, err := timedqueue.New(func(ctx context.Context, k string) error {
			if k == "other" {
				<-release
				return nil
			}
			shut <- q.Shutdown(ctx)
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		// Due together, after all three are added: a work func that started
		// at once could shut the queue down before the next AddWork.
		fire := t0.Add(time.Second)
		require.True(t, q.AddWork("other", t0, fire))
		require.True(t, q.AddWork("a", t0, fire))
		require.True(t, q.AddWork("b", t0, fire))
		clk.Step(time.Second)
		synctest.Wait()
		assertBlocked(t, shut, "Shutdown from a work func")
		close(release)
		require.NoError(t, <-shut)
		require.NoError(t, <-shut)
		require.NoError(t, q.Shutdown(context.Background()))
	})
}
