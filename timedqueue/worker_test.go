package timedqueue_test

import (
	"context"
	"runtime"
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

func TestPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, fl := setup(t)
		f.script("a", errPanic, errPanic, errPanic)
		q.AddWork("a", t0, t0)
		synctest.Wait()
		step(clk, time.Second)
		step(clk, 2*time.Second)
		assert.Len(t, f.takeRuns(), 3, "a panic is a failure, retried")
		calls := fl.get()
		require.Len(t, calls, 1)
		var pe *timedqueue.PanicError
		require.ErrorAs(t, calls[0].err, &pe)
		assert.Equal(t, "boom a", pe.Value)
		assert.Equal(t, "timedqueue: panic: boom a", pe.Error())
		assert.Contains(t, string(pe.Stack), "fake).work")
		// The queue still works.
		q.AddWork("b", t0, clk.Now())
		synctest.Wait()
		assert.Len(t, f.takeRuns(), 1)
	})
}

func TestGoexitInWorkFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var mu sync.Mutex
		var ran []string
		fl := &failures{}
		q, err := timedqueue.New(func(_ context.Context, k string) error {
			mu.Lock()
			ran = append(ran, k)
			mu.Unlock()
			if k == "exit" {
				runtime.Goexit()
			}
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(1), timedqueue.WithLogger(logr.Discard()),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 1}), timedqueue.WithFailureHook(fl.hook))
		require.NoError(t, err)
		q.AddWork("exit", t0, t0)
		q.AddWork("next", t0, t0)
		synctest.Wait()
		assert.Equal(t, []string{"exit", "next"}, ran)
		require.Len(t, fl.get(), 1)
		assert.ErrorIs(t, fl.get()[0].err, timedqueue.ErrGoexit)
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

// A work func and then the failure hook may both call runtime.Goexit (t.FailNow
// in both): the slot is still given back, later work runs and Shutdown returns.
func TestGoexitInWorkFuncAndFailureHookFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var mu sync.Mutex
		var ran []string
		q, err := timedqueue.New(func(_ context.Context, k string) error {
			mu.Lock()
			ran = append(ran, k)
			mu.Unlock()
			if k == "exit" {
				runtime.Goexit()
			}
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()), timedqueue.WithMaxConcurrency(1),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 1}),
			timedqueue.WithFailureHook(func(timedqueue.TimedWorker[string], error) { runtime.Goexit() }))
		require.NoError(t, err)
		q.AddWork("exit", t0, t0)
		q.AddWork("next", t0, t0)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []string{"exit", "next"}, ran)
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		assert.NoError(t, q.Shutdown(ctx))
	})
}

func TestAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		got := make(chan error, 1)
		var deadline time.Time
		q, err := timedqueue.New(func(ctx context.Context, _ string) error {
			deadline, _ = ctx.Deadline()
			<-ctx.Done()
			got <- ctx.Err()
			return ctx.Err()
		}, timedqueue.WithClock(clk), timedqueue.WithAttemptTimeout(5*time.Second),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 1}), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		q.AddWork("a", t0, t0)
		step(clk, 5*time.Second-time.Nanosecond)
		assert.Len(t, got, 0)
		assert.True(t, deadline.Equal(t0.Add(5*time.Second)))
		step(clk, time.Nanosecond)
		assert.Equal(t, context.DeadlineExceeded, <-got)
		assert.Equal(t, 0, q.Len())
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

// After an attempt timeout the work ctx reports DeadlineExceeded; a ctx
// derived from it reports Canceled with cause DeadlineExceeded (documented on
// WithAttemptTimeout).
func TestAttemptTimeoutDerivedCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		got := make(chan [3]error, 1)
		q, err := timedqueue.New(func(ctx context.Context, _ string) error {
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			<-child.Done()
			got <- [3]error{ctx.Err(), child.Err(), context.Cause(child)}
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()), timedqueue.WithAttemptTimeout(time.Second))
		require.NoError(t, err)
		defer func() { require.NoError(t, q.Shutdown(context.Background())) }()
		q.AddWork("a", t0, t0)
		synctest.Wait()
		clk.Step(time.Second)
		e := <-got
		assert.Equal(t, context.DeadlineExceeded, e[0], "work ctx Err")
		assert.Equal(t, context.Canceled, e[1], "derived ctx Err")
		assert.Equal(t, context.DeadlineExceeded, e[2], "derived ctx Cause")
	})
}
