package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

func TestRetryThenSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, fl := setup(t, timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 3 * time.Second}))
		f.script("a", errors.New("1"), errors.New("2"), errors.New("3"))
		q.AddWork("a", t0, t0)
		synctest.Wait()
		for range 10 {
			step(clk, 500*time.Millisecond)
		}
		// Backoffs 1s, 2s, then 4s capped at 3s.
		assert.Equal(t, []run{{"a", 0}, {"a", time.Second}, {"a", 3 * time.Second}}, f.takeRuns())
		step(clk, time.Second)
		assert.Equal(t, []run{{"a", 6 * time.Second}}, f.takeRuns())
		assert.Equal(t, 0, q.Len())
		assert.Empty(t, fl.get())
	})
}

func TestRetryExhaustedThenReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, fl := setup(t) // MaxAttempts 3
		last := errors.New("3")
		f.script("a", errors.New("1"), errors.New("2"), last)
		q.AddWork("a", t0.Add(-time.Minute), t0)
		synctest.Wait()
		step(clk, time.Second)
		step(clk, 2*time.Second)
		step(clk, time.Hour)
		assert.Equal(t, []run{{"a", 0}, {"a", time.Second}, {"a", 3 * time.Second}}, f.takeRuns())
		_, ok := q.GetWorker("a")
		assert.False(t, ok, "released after the last attempt")
		calls := fl.get()
		require.Len(t, calls, 1)
		assert.Equal(t, last, calls[0].err)
		assert.Equal(t, timedqueue.TimedWorker[string]{Key: "a", CreatedAt: t0.Add(-time.Minute), FireAt: t0, Attempts: 3, NextAttempt: t0.Add(3 * time.Second)}, calls[0].w)
		assert.True(t, q.AddWork("a", t0, t0))
	})
}

func TestPermanentErrorNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, fl := setup(t)
		cause := errors.New("pod is gone")
		f.script("a", fmt.Errorf("wrapped: %w", timedqueue.Permanent(cause)))
		q.AddWork("a", t0, t0)
		synctest.Wait()
		step(clk, time.Hour)
		assert.Len(t, f.takeRuns(), 1)
		calls := fl.get()
		require.Len(t, calls, 1)
		assert.True(t, timedqueue.IsPermanent(calls[0].err))
		assert.ErrorIs(t, calls[0].err, cause)
		assert.Equal(t, 1, calls[0].w.Attempts)
		assert.Equal(t, 0, q.Len())
	})
}

func TestPermanent(t *testing.T) {
	assert.NoError(t, timedqueue.Permanent(nil))
	assert.False(t, timedqueue.IsPermanent(nil))
	assert.False(t, timedqueue.IsPermanent(errors.New("x")))
	err := timedqueue.Permanent(context.Canceled)
	assert.Equal(t, "context canceled", err.Error())
	assert.ErrorIs(t, err, context.Canceled)
}

func TestRetryPolicyBackoff(t *testing.T) {
	var zero timedqueue.RetryPolicy
	assert.Equal(t, time.Second, zero.Backoff(0), "n below 1 counts as 1")
	assert.Equal(t, time.Second, zero.Backoff(1))
	assert.Equal(t, 4*time.Second, zero.Backoff(3))
	assert.Equal(t, time.Minute, zero.Backoff(40), "capped at the default MaxBackoff, without overflow")
	p := timedqueue.RetryPolicy{InitialBackoff: 300 * time.Millisecond, MaxBackoff: time.Second}
	assert.Equal(t, []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, time.Second, time.Second},
		[]time.Duration{p.Backoff(1), p.Backoff(2), p.Backoff(3), p.Backoff(4)})
	only := timedqueue.RetryPolicy{MaxBackoff: 100 * time.Millisecond}
	assert.Equal(t, 100*time.Millisecond, only.Backoff(1), "a MaxBackoff alone caps every wait")
	bad := timedqueue.RetryPolicy{InitialBackoff: -time.Second}
	assert.Equal(t, zero.Backoff(2), bad.Backoff(2), "an invalid policy waits as the default")
}

func TestRetryAtWaitsWithoutFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var mu sync.Mutex
		var starts []time.Duration
		refused := errors.New("refused by a budget")
		var hooks int
		q, err := timedqueue.New(func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, clk.Since(t0))
			if len(starts) <= 3 { // refused three times, each asking for 10 s more
				return timedqueue.RetryAt(clk.Now().Add(10*time.Second), refused)
			}
			return nil
		}, timedqueue.WithClock(clk),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 1}), // no retry at all: RetryAt is not one
			timedqueue.WithFailureHook(func(timedqueue.TimedWorker[string], error) { hooks++ }),
			timedqueue.WithRetryHook(func(timedqueue.TimedWorker[string], error) { hooks++ }))
		require.NoError(t, err)
		fireAt := t0.Add(time.Second)
		require.True(t, q.AddWork("a", t0, fireAt))

		clk.Step(time.Second)
		synctest.Wait()
		w, ok := q.GetWorker("a")
		require.True(t, ok, "a deferred schedule stays live")
		assert.Equal(t, 0, w.Attempts, "RetryAt is not a failed attempt")
		assert.True(t, w.FireAt.Equal(fireAt), "FireAt is kept")
		assert.True(t, w.NextAttempt.Equal(t0.Add(11*time.Second)), "NextAttempt %v", w.NextAttempt)
		assert.False(t, w.Running)

		clk.Step(10*time.Second - time.Nanosecond)
		synctest.Wait()
		mu.Lock()
		assert.Len(t, starts, 1, "never before the time RetryAt gave")
		mu.Unlock()
		clk.Step(time.Nanosecond)
		synctest.Wait()
		for range 2 {
			clk.Step(10 * time.Second)
			synctest.Wait()
		}
		mu.Lock()
		assert.Equal(t, []time.Duration{time.Second, 11 * time.Second, 21 * time.Second, 31 * time.Second}, starts[:4])
		mu.Unlock()
		assert.Equal(t, 0, q.Len(), "the success ended the schedule")
		assert.Equal(t, 0, hooks, "no failure or retry hook for RetryAt")
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

func TestRetryAtInThePastRunsWhenASlotIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var n int
		q, err := timedqueue.New(func(_ context.Context, key string) error {
			n++
			if n == 1 {
				return timedqueue.RetryAt(t0.Add(-time.Hour), nil)
			}
			return nil
		}, timedqueue.WithClock(clk))
		require.NoError(t, err)
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		assert.Equal(t, 2, n)
		assert.Equal(t, 0, q.Len())
	})
}

func TestRetryAtWrappedAndRescheduled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var calls int
		q, err := timedqueue.New(func(_ context.Context, key string) error {
			calls++
			if calls == 1 {
				return errors.Join(errors.New("context"), timedqueue.RetryAt(t0.Add(time.Hour), nil))
			}
			return nil
		}, timedqueue.WithClock(clk))
		require.NoError(t, err)
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		w, ok := q.GetWorker("a")
		require.True(t, ok)
		assert.True(t, w.NextAttempt.Equal(t0.Add(time.Hour)))
		// A reschedule replaces the deferred wait, as it replaces a backoff.
		require.True(t, q.UpdateWork("a", t0, t0.Add(time.Minute)))
		w, _ = q.GetWorker("a")
		assert.True(t, w.NextAttempt.Equal(t0.Add(time.Minute)), "NextAttempt %v", w.NextAttempt)
		clk.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, 2, calls)
		assert.Equal(t, 0, q.Len())
	})
}

func TestRetryAtAfterShutdownDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		gate := make(chan struct{})
		calls := 0
		q, err := timedqueue.New(func(ctx context.Context, key string) error {
			calls++
			<-gate
			return timedqueue.RetryAt(t0, nil)
		}, timedqueue.WithClock(clk))
		require.NoError(t, err)
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		done := make(chan error)
		go func() { done <- q.Shutdown(context.Background()) }()
		synctest.Wait()
		close(gate)
		require.NoError(t, <-done)
		synctest.Wait()
		assert.Equal(t, 1, calls, "a deferred schedule does not run after Shutdown")
		assert.Equal(t, 0, q.Len())
	})
}

// UnlimitedAttempts: a failing schedule is retried, every MaxBackoff once
// the backoff is capped, until an attempt succeeds; nothing is given up.
func TestUnlimitedAttemptsRetryUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, fl := setup(t, timedqueue.WithRetry(timedqueue.RetryPolicy{
			MaxAttempts: timedqueue.UnlimitedAttempts, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second}))
		errs := make([]error, 40) // far beyond DefaultMaxAttempts
		for i := range errs {
			errs[i] = fmt.Errorf("refused %d", i+1)
		}
		f.script("a", errs...)
		q.AddWork("a", t0, t0)
		synctest.Wait()
		require.Equal(t, []run{{"a", 0}}, f.takeRuns())
		at := time.Duration(0)
		for i := 1; i <= len(errs); i++ {
			wait := 4 * time.Second // 1s, 2s, then capped
			if i < 3 {
				wait = time.Second << (i - 1)
			}
			step(clk, wait-time.Nanosecond)
			require.Empty(t, f.takeRuns(), "retry %d came before its backoff of %v", i, wait)
			w, ok := q.GetWorker("a")
			require.True(t, ok, "still scheduled after %d failures", i)
			require.Equal(t, i, w.Attempts)
			step(clk, time.Nanosecond)
			at += wait
			require.Equal(t, []run{{"a", at}}, f.takeRuns())
		}
		assert.Equal(t, 0, q.Len(), "the 41st attempt succeeded: released")
		assert.Empty(t, fl.get(), "nothing was given up")
	})
}

// UnlimitedAttempts ends when the caller ends it: CancelWork while it backs
// off, a Permanent error, or Shutdown. None of them leaves an attempt behind.
func TestUnlimitedAttemptsEndWhenTheCallerEndsThem(t *testing.T) {
	policy := timedqueue.WithRetry(timedqueue.RetryPolicy{
		MaxAttempts: timedqueue.UnlimitedAttempts, InitialBackoff: time.Second, MaxBackoff: time.Second})
	always := func(f *fake, key string, last error) {
		errs := make([]error, 100)
		for i := range errs {
			errs[i] = errors.New("refused")
		}
		if last != nil {
			errs[len(errs)-1] = last
		}
		f.script(key, errs...)
	}
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk, f, q, fl := setup(t, policy)
			always(f, "a", nil)
			q.AddWork("a", t0, t0)
			synctest.Wait()
			for range 10 {
				step(clk, time.Second)
			}
			assert.Len(t, f.takeRuns(), 11)
			assert.True(t, q.CancelWork("a"), "a backing-off schedule is cancelled")
			step(clk, time.Hour)
			assert.Empty(t, f.takeRuns())
			assert.Empty(t, fl.get(), "a cancelled schedule is not a failure")
		})
	})
	t.Run("permanent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk, f, q, fl := setup(t, policy)
			gone := timedqueue.Permanent(errors.New("the pod is another pod now"))
			always(f, "a", gone)
			q.AddWork("a", t0, t0)
			synctest.Wait()
			for range 100 {
				step(clk, time.Second)
			}
			assert.Len(t, f.takeRuns(), 100)
			calls := fl.get()
			require.Len(t, calls, 1)
			assert.Equal(t, gone, calls[0].err)
			assert.Equal(t, 100, calls[0].w.Attempts)
			assert.Equal(t, 0, q.Len())
		})
	})
	t.Run("shutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk, f, q, _ := setup(t, policy)
			always(f, "a", nil)
			q.AddWork("a", t0, t0)
			synctest.Wait()
			step(clk, time.Second)
			require.NoError(t, q.Shutdown(context.Background()))
			step(clk, time.Hour)
			assert.Len(t, f.takeRuns(), 2, "no attempt after Shutdown")
		})
	})
}
