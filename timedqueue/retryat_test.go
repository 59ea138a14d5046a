package timedqueue_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

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

func TestAppendWorkersListsEveryLiveSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		gate := make(chan struct{})
		q, err := timedqueue.New(func(ctx context.Context, key string) error {
			if key == "running" {
				<-gate
			}
			if key == "failing" {
				return errors.New("no")
			}
			return nil
		}, timedqueue.WithClock(clk))
		require.NoError(t, err)
		require.True(t, q.AddWork("running", t0, t0))
		require.True(t, q.AddWork("failing", t0, t0))
		require.True(t, q.AddWork("pending", t0, t0.Add(time.Hour)))
		require.True(t, q.AddWork("cancelled", t0, t0.Add(time.Hour)))
		require.True(t, q.CancelWork("cancelled"))
		synctest.Wait()

		ws := q.AppendWorkers(nil)
		sort.Slice(ws, func(i, j int) bool { return ws[i].Key < ws[j].Key })
		require.Len(t, ws, 3)
		assert.Equal(t, "failing", ws[0].Key)
		assert.Equal(t, 1, ws[0].Attempts)
		assert.Equal(t, "pending", ws[1].Key)
		assert.Equal(t, "running", ws[2].Key)
		assert.True(t, ws[2].Running)
		for _, w := range ws {
			got, ok := q.GetWorker(w.Key)
			require.True(t, ok)
			assert.Equal(t, got, w, "AppendWorkers and GetWorker agree")
		}
		// It appends.
		assert.Len(t, q.AppendWorkers(make([]timedqueue.TimedWorker[string], 2)), 5)
		close(gate)
		require.NoError(t, q.Shutdown(context.Background()))
	})
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
