package timedqueue_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

func TestAddWorkOnHeldKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		fire := t0.Add(10 * time.Second)
		require.True(t, q.AddWork("a", t0, fire))

		// pending
		assert.False(t, q.AddWork("a", t0, t0.Add(time.Second)))
		w, ok := q.GetWorker("a")
		require.True(t, ok)
		assert.Equal(t, timedqueue.TimedWorker[string]{Key: "a", CreatedAt: t0, FireAt: fire, NextAttempt: fire}, w)

		// running
		gate := f.setGate("a")
		f.script("a", errors.New("fail once"))
		step(clk, 10*time.Second)
		assert.False(t, q.AddWork("a", t0, t0))
		w, ok = q.GetWorker("a")
		require.True(t, ok)
		assert.True(t, w.Running)
		assert.Equal(t, 1, q.Len())

		// backing off
		gate <- struct{}{}
		synctest.Wait()
		w, ok = q.GetWorker("a")
		require.True(t, ok)
		assert.False(t, w.Running)
		assert.Equal(t, 1, w.Attempts)
		assert.Equal(t, fire.Add(time.Second), w.NextAttempt)
		assert.False(t, q.AddWork("a", t0, t0))
		assert.Equal(t, []run{{"a", 10 * time.Second}}, f.takeRuns())

		// the backoff goes on: the retry runs at +11s
		step(clk, time.Second)
		gate <- struct{}{}
		synctest.Wait()
		assert.Equal(t, []run{{"a", 11 * time.Second}}, f.takeRuns())
		assert.Equal(t, 0, q.Len())
	})
}

func TestReAddRightAfterSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f, q, _ := setup(t)
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		// The original kept a nil tombstone here, refusing the key forever.
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		assert.Equal(t, []run{{"a", 0}, {"a", 0}}, f.takeRuns())
	})
}

func TestUpdateWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)

		// absent: as AddWork
		require.True(t, q.UpdateWork("later", t0, t0.Add(10*time.Second)))
		require.True(t, q.UpdateWork("earlier", t0, t0.Add(10*time.Second)))
		require.True(t, q.UpdateWork("same", t0, t0.Add(10*time.Second)))

		// later (the original could only move earlier)
		created := t0.Add(time.Minute)
		assert.True(t, q.UpdateWork("later", created, t0.Add(20*time.Second)))
		w, _ := q.GetWorker("later")
		assert.Equal(t, created, w.CreatedAt)
		assert.Equal(t, t0.Add(20*time.Second), w.FireAt)
		// earlier
		assert.True(t, q.UpdateWork("earlier", t0, t0.Add(5*time.Second)))
		// same instant in another Location: Equal, so no change
		assert.False(t, q.UpdateWork("same", created, t0.Add(10*time.Second).In(time.FixedZone("X", 3600))))
		w, _ = q.GetWorker("same")
		assert.Equal(t, t0, w.CreatedAt, "no change on an equal FireAt")

		step(clk, 5*time.Second)
		assert.Equal(t, []run{{"earlier", 5 * time.Second}}, f.takeRuns())
		step(clk, 5*time.Second)
		assert.Equal(t, []run{{"same", 10 * time.Second}}, f.takeRuns())

		// while running: no change
		gate := f.setGate("later")
		step(clk, 10*time.Second)
		assert.False(t, q.UpdateWork("later", t0, t0.Add(time.Hour)))
		w, ok := q.GetWorker("later")
		require.True(t, ok)
		assert.True(t, w.Running)
		assert.Equal(t, t0.Add(20*time.Second), w.FireAt)
		close(gate)
		synctest.Wait()
		assert.Equal(t, []run{{"later", 20 * time.Second}}, f.takeRuns())
		assert.Equal(t, 0, q.Len())
	})
}

func TestUpdateWorkDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		fire := t0.Add(10 * time.Second)
		f.script("a", errors.New("1"), errors.New("2"))
		require.True(t, q.AddWork("a", t0, fire))
		step(clk, 10*time.Second) // attempt 1 fails: retry at +11s
		// The same FireAt keeps the backoff going.
		assert.False(t, q.UpdateWork("a", t0.Add(time.Hour), fire))
		w, _ := q.GetWorker("a")
		assert.Equal(t, 1, w.Attempts)
		assert.Equal(t, t0, w.CreatedAt)
		assert.Equal(t, fire.Add(time.Second), w.NextAttempt)
		step(clk, time.Second) // attempt 2 fails: retry at +13s
		w, _ = q.GetWorker("a")
		assert.Equal(t, 2, w.Attempts)
		assert.Equal(t, fire.Add(3*time.Second), w.NextAttempt)

		// Another FireAt reschedules and resets Attempts: MaxAttempts starts over.
		newFire := t0.Add(time.Minute)
		assert.True(t, q.UpdateWork("a", t0.Add(time.Hour), newFire))
		w, _ = q.GetWorker("a")
		assert.Equal(t, timedqueue.TimedWorker[string]{Key: "a", CreatedAt: t0.Add(time.Hour), FireAt: newFire, NextAttempt: newFire}, w)
		f.script("a", errors.New("3"), errors.New("4"))
		step(clk, 2*time.Second) // +13s: the old retry time, nothing
		assert.Len(t, f.takeRuns(), 2)
		step(clk, 47*time.Second) // +60s fails, +61s fails, +63s succeeds
		step(clk, time.Second)
		step(clk, 2*time.Second)
		assert.Equal(t, []run{{"a", 60 * time.Second}, {"a", 61 * time.Second}, {"a", 63 * time.Second}}, f.takeRuns())
		assert.Equal(t, 0, q.Len())
	})
}

func TestCancelWork(t *testing.T) {
	t.Run("pending", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk, f, q, _ := setup(t)
			q.AddWork("a", t0, t0.Add(time.Second))
			assert.True(t, q.CancelWork("a"))
			assert.Equal(t, 0, q.Len())
			assert.Equal(t, 0, clk.Waiters(), "timer left armed")
			step(clk, time.Hour)
			assert.Empty(t, f.takeRuns())
			assert.False(t, q.CancelWork("a"), "absent")
		})
	})
	t.Run("pending and due, all slots busy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, f, q, _ := setup(t, timedqueue.WithMaxConcurrency(1))
			gate := f.setGate("busy")
			q.AddWork("busy", t0, t0)
			q.AddWork("a", t0, t0)
			synctest.Wait()
			assert.True(t, q.CancelWork("a"), "due but not started")
			close(gate)
			synctest.Wait()
			assert.Equal(t, []run{{"busy", 0}}, f.takeRuns())
		})
	})
	t.Run("backing off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk, f, q, fl := setup(t)
			f.script("a", errors.New("fail"))
			q.AddWork("a", t0, t0)
			synctest.Wait()
			w, _ := q.GetWorker("a")
			require.Equal(t, 1, w.Attempts)
			assert.True(t, q.CancelWork("a"))
			step(clk, time.Hour)
			assert.Equal(t, []run{{"a", 0}}, f.takeRuns(), "retried after cancel")
			assert.Empty(t, fl.get(), "a cancelled schedule is not a failure")
		})
	})
	t.Run("running", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk, f, q, fl := setup(t)
			gate := f.setGate("a")
			f.script("a", errors.New("fail"))
			q.AddWork("a", t0, t0)
			synctest.Wait()
			assert.False(t, q.CancelWork("a"), "an attempt in flight cannot be recalled")
			_, ok := q.GetWorker("a")
			assert.False(t, ok, "withdrawn")
			assert.Equal(t, 0, q.Len(), "withdrawn")
			assert.False(t, q.CancelWork("a"), "withdrawn")
			close(gate)
			step(clk, time.Hour)
			assert.Equal(t, []run{{"a", 0}}, f.takeRuns(), "a withdrawn attempt is not retried")
			assert.Empty(t, fl.get())
			f.mu.Lock()
			assert.NoError(t, f.ctxErrs["a"], "cancel does not cancel the running ctx")
			f.mu.Unlock()
		})
	})
}

func TestCancelRunningThenReAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		gate := f.setGate("a")
		q.AddWork("a", t0, t0)
		synctest.Wait()
		require.False(t, q.CancelWork("a"))

		// The key is free at once; the new schedule is due but waits for the
		// withdrawn attempt.
		require.True(t, q.AddWork("a", t0, t0.Add(time.Second)))
		assert.False(t, q.AddWork("a", t0, t0), "held by the new schedule")
		w, ok := q.GetWorker("a")
		require.True(t, ok)
		assert.False(t, w.Running)
		step(clk, 2*time.Second)
		assert.Equal(t, []run{{"a", 0}}, f.takeRuns(), "started while the withdrawn attempt runs")

		// A withdrawn → re-added → cancelled → re-added chain still waits.
		assert.True(t, q.CancelWork("a"))
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		assert.Empty(t, f.takeRuns())

		gate <- struct{}{} // the withdrawn attempt returns; the new one starts at once
		synctest.Wait()
		assert.Equal(t, []run{{"a", 2 * time.Second}}, f.takeRuns())
		w, ok = q.GetWorker("a")
		require.True(t, ok, "the old attempt's end removed the new schedule")
		assert.True(t, w.Running)

		// The new schedule is not lost: cancel it while running, re-add, cancel pending.
		assert.False(t, q.CancelWork("a"))
		require.True(t, q.AddWork("a", t0, t0.Add(time.Hour)))
		gate <- struct{}{}
		synctest.Wait()
		assert.True(t, q.CancelWork("a"), "the re-added entry must stay cancellable")
		step(clk, 2*time.Hour)
		assert.Empty(t, f.takeRuns())
		assert.Equal(t, 0, q.Len())
	})
}

// AddWork and UpdateWork report false exactly when they change nothing.
func TestAddWorkAndUpdateWorkReportChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		fire := t0.Add(time.Minute)
		gate := f.setGate("running")
		require.True(t, q.AddWork("running", t0, t0))
		require.True(t, q.AddWork("pending", t0, fire))
		f.script("backing-off", errors.New("fail once"))
		require.True(t, q.AddWork("backing-off", t0, t0))
		synctest.Wait()
		w, _ := q.GetWorker("backing-off")
		require.Equal(t, 1, w.Attempts)

		for _, tc := range []struct {
			name string
			call func() bool
		}{
			{"AddWork pending", func() bool { return q.AddWork("pending", t0, t0) }},
			{"AddWork running", func() bool { return q.AddWork("running", t0, t0) }},
			{"AddWork backing off", func() bool { return q.AddWork("backing-off", t0, t0) }},
			{"UpdateWork running", func() bool { return q.UpdateWork("running", t0, fire) }},
			{"UpdateWork running, same FireAt", func() bool { return q.UpdateWork("running", t0, t0) }},
			{"UpdateWork same FireAt (another Location)", func() bool { return q.UpdateWork("pending", t0, fire.In(time.FixedZone("X", 60))) }},
			{"UpdateWork same FireAt while backing off", func() bool { return q.UpdateWork("backing-off", t0, t0) }},
		} {
			assert.False(t, tc.call(), tc.name)
		}
		w, _ = q.GetWorker("backing-off")
		assert.Equal(t, 1, w.Attempts, "the backoff goes on")
		assert.Equal(t, 3, q.Len(), "nothing changed")

		require.True(t, q.UpdateWork("pending", t0, fire.Add(time.Second)))
		require.True(t, q.UpdateWork("absent", t0, fire), "UpdateWork of an absent key schedules")
		close(gate)
		step(clk, time.Hour)
		require.NoError(t, q.Shutdown(context.Background()))
		assert.False(t, q.AddWork("new", t0, t0))
		assert.False(t, q.UpdateWork("new", t0, t0))
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

func TestNewErrors(t *testing.T) {
	work := func(context.Context, string) error { return nil }
	tests := []struct {
		name string
		work timedqueue.WorkFunc[string]
		opts []timedqueue.Option
		want string
	}{
		{"nil work", nil, nil, "timedqueue: work func must not be nil"},
		{"zero concurrency", work, []timedqueue.Option{timedqueue.WithMaxConcurrency(0)}, "timedqueue: MaxConcurrency must be at least 1, got 0"},
		{"huge concurrency", work, []timedqueue.Option{timedqueue.WithMaxConcurrency(1<<20 + 1)}, "timedqueue: MaxConcurrency must be at most 1048576, got 1048577"},
		{"nil clock", work, []timedqueue.Option{timedqueue.WithClock(nil)}, "timedqueue: WithClock: clock must not be nil"},
		{"negative attempts", work, []timedqueue.Option{timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: -2})}, "MaxAttempts must not be negative but for UnlimitedAttempts (-1), got -2"},
		{"negative initial", work, []timedqueue.Option{timedqueue.WithRetry(timedqueue.RetryPolicy{InitialBackoff: -time.Second})}, "InitialBackoff must not be negative, got -1s"},
		{"negative max", work, []timedqueue.Option{timedqueue.WithRetry(timedqueue.RetryPolicy{MaxBackoff: -time.Second})}, "MaxBackoff must not be negative, got -1s"},
		{"max below initial", work, []timedqueue.Option{timedqueue.WithRetry(timedqueue.RetryPolicy{InitialBackoff: time.Minute, MaxBackoff: time.Second})}, "timedqueue: RetryPolicy.MaxBackoff (1s) must not be less than RetryPolicy.InitialBackoff (1m0s)"},
		{"negative timeout", work, []timedqueue.Option{timedqueue.WithAttemptTimeout(-1)}, "AttemptTimeout must not be negative, got -1ns"},
		{"nil metrics", work, []timedqueue.Option{timedqueue.WithMetricsProvider(nil)}, "provider must not be nil"},
		{"nil option", work, []timedqueue.Option{nil}, "nil Option"},
		{"hook key type", work, []timedqueue.Option{timedqueue.WithFailureHook(func(timedqueue.TimedWorker[int], error) {})}, "WithFailureHook: hook type timedqueue.FailureFunc[int] does not match the queue's key type string"},
		{"retry hook key type", work, []timedqueue.Option{timedqueue.WithRetryHook(func(timedqueue.TimedWorker[int], error) {})}, "WithRetryHook: hook type timedqueue.RetryFunc[int] does not match the queue's key type string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := timedqueue.New(tc.work, tc.opts...)
			assert.Nil(t, q)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "timedqueue: "), err.Error())
		})
	}
}
