package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// errPanic, as a scripted result, makes the fake work func panic.
var errPanic = errors.New("panic please")

// run is one start of the fake work func: key and clock offset from t0.
type run struct {
	key string
	at  time.Duration
}

func (r run) String() string { return fmt.Sprintf("%s@%v", r.key, r.at) }

// fake is a scriptable work func that records its runs and checks that no key
// runs concurrently with itself.
type fake struct {
	clk *testingclock.FakeClock

	mu          sync.Mutex
	runs        []run
	errs        map[string][]error       // results per key, one per attempt; nil after
	gates       map[string]chan struct{} // if set, each attempt waits for a value or close
	ctxErrs     map[string]error         // ctx.Err() seen after the gate, per key
	inFlight    map[string]bool
	concurrent  int
	peak        int
	overlapping []string
}

func newFake(clk *testingclock.FakeClock) *fake {
	return &fake{clk: clk, errs: map[string][]error{}, gates: map[string]chan struct{}{},
		ctxErrs: map[string]error{}, inFlight: map[string]bool{}}
}

func (f *fake) work(ctx context.Context, key string) error {
	f.mu.Lock()
	f.runs = append(f.runs, run{key, f.clk.Since(t0)})
	if f.inFlight[key] {
		f.overlapping = append(f.overlapping, key)
	}
	f.inFlight[key] = true
	f.concurrent++
	f.peak = max(f.peak, f.concurrent)
	var err error
	if l := f.errs[key]; len(l) > 0 {
		err, f.errs[key] = l[0], l[1:]
	}
	gate := f.gates[key]
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	f.ctxErrs[key] = ctx.Err()
	f.inFlight[key] = false
	f.concurrent--
	f.mu.Unlock()
	if err == errPanic {
		panic("boom " + key)
	}
	return err
}

func (f *fake) setGate(key string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.gates[key] = ch
	return ch
}

func (f *fake) script(key string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[key] = errs
}

func (f *fake) takeRuns() []run {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs
	f.runs = nil
	return r
}

func (f *fake) noOverlap(t *testing.T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.overlapping, "keys that ran concurrently with themselves")
}

// failures records the failure hook's calls.
type failures struct {
	mu    sync.Mutex
	calls []failure
}

type failure struct {
	w   timedqueue.TimedWorker[string]
	err error
}

func (f *failures) hook(w timedqueue.TimedWorker[string], err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, failure{w, err})
}

func (f *failures) get() []failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]failure(nil), f.calls...)
}

// setup makes a FakeClock at t0, a fake work func and a queue that shuts down
// (and so checks for leaked goroutines) at the end of the test. It must run
// inside a synctest bubble.
func setup(t *testing.T, opts ...timedqueue.Option) (*testingclock.FakeClock, *fake, *timedqueue.TimedWorkerQueue[string], *failures) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	f := newFake(clk)
	fl := &failures{}
	opts = append([]timedqueue.Option{
		timedqueue.WithClock(clk),
		timedqueue.WithLogger(logr.Discard()),
		timedqueue.WithFailureHook(fl.hook),
		timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}),
	}, opts...)
	q, err := timedqueue.New(f.work, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		f.mu.Lock()
		for k, g := range f.gates { // let blocked work return
			closeOnce(g)
			delete(f.gates, k)
		}
		f.mu.Unlock()
		require.NoError(t, q.Shutdown(context.Background()))
		f.noOverlap(t)
	})
	return clk, f, q, fl
}

// closeOnce closes ch unless a test closed it already.
func closeOnce(ch chan struct{}) {
	defer func() { _ = recover() }()
	close(ch)
}

// step moves the clock and lets the queue settle.
func step(clk *testingclock.FakeClock, d time.Duration) {
	clk.Step(d)
	synctest.Wait()
}

func TestNeverBeforeFireAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		require.True(t, q.AddWork("a", t0, t0.Add(10*time.Second)))
		step(clk, 10*time.Second-time.Nanosecond)
		assert.Empty(t, f.takeRuns(), "ran before FireAt")
		step(clk, time.Nanosecond)
		assert.Equal(t, []run{{"a", 10 * time.Second}}, f.takeRuns())
		assert.Equal(t, 0, q.Len(), "success releases the key")
		_, ok := q.GetWorker("a")
		assert.False(t, ok)
	})
}

func TestFireAtIsAbsolute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		// The original waited fireAt-createdAt from now: 1h10s here.
		require.True(t, q.AddWork("old", t0.Add(-time.Hour), t0.Add(10*time.Second)))
		// A FireAt in the past starts at once.
		require.True(t, q.AddWork("past", t0.Add(-2*time.Hour), t0.Add(-time.Hour)))
		synctest.Wait()
		assert.Equal(t, []run{{"past", 0}}, f.takeRuns())
		step(clk, 10*time.Second)
		assert.Equal(t, []run{{"old", 10 * time.Second}}, f.takeRuns())
	})
}

func TestStepRightAfterAddIsSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		for i := range 50 {
			q.AddWork(fmt.Sprint(i), t0, clk.Now().Add(time.Second))
			clk.Step(time.Second) // no Wait in between: AddWork must have armed the timer
		}
		synctest.Wait()
		assert.Len(t, f.takeRuns(), 50)
	})
}

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

func TestNoGoroutineOrTimerPerPendingItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		before := runtime.NumGoroutine()
		q, err := timedqueue.New(func(context.Context, int) error { return nil }, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		for i := range 100_000 {
			q.AddWork(i, t0, t0.Add(time.Hour+time.Duration(i)*time.Millisecond))
		}
		synctest.Wait()
		assert.Equal(t, 100_000, q.Len())
		assert.LessOrEqual(t, runtime.NumGoroutine()-before, 1, "goroutines for 100k pending items")
		assert.Equal(t, 1, clk.Waiters(), "clock waiters for 100k pending items")
		require.NoError(t, q.Shutdown(context.Background()))
		assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left after Shutdown (synctest.Test also checks)")
		assert.Equal(t, 0, clk.Waiters())
	})
}

func TestGetWorkerKeepsTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, q, _ := setup(t)
		zone := time.FixedZone("UTC+3", 3*3600)
		created := time.Date(2024, 12, 31, 23, 0, 0, 0, time.Local)
		fire := time.Date(2025, 1, 1, 7, 0, 0, 123, zone)
		q.AddWork("a", created, fire)
		w, ok := q.GetWorker("a")
		require.True(t, ok)
		assert.Equal(t, created, w.CreatedAt)
		assert.Equal(t, fire, w.FireAt)
		assert.Equal(t, zone, w.FireAt.Location())
		// Far future: kept at full precision.
		far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
		q.AddWork("far", t0, far)
		w, _ = q.GetWorker("far")
		assert.Equal(t, far, w.FireAt)
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
		{"negative attempts", work, []timedqueue.Option{timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: -1})}, "MaxAttempts must not be negative, got -1"},
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

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCountingProvider()
		clk, f, q, _ := setup(t, timedqueue.WithMetricsProvider(m))
		f.script("a", errors.New("once"))
		q.AddWork("a", t0, t0.Add(time.Second))
		q.AddWork("b", t0, t0.Add(time.Hour))
		q.UpdateWork("b", t0, t0.Add(2*time.Hour))
		assert.Equal(t, 3, m.get("adds"))
		assert.Equal(t, 2, m.get("depth"))
		step(clk, 3*time.Second) // a: late by 2s, fails; retried at +4s
		assert.Equal(t, 1, m.get("retries"))
		assert.Equal(t, 2, m.get("depth"))
		gate := f.setGate("a")
		step(clk, time.Second)
		assert.Equal(t, 1, m.get("running"))
		assert.Equal(t, 1, m.get("depth"))
		close(gate)
		synctest.Wait()
		assert.Equal(t, 0, m.get("running"))
		assert.Equal(t, []float64{2}, m.observations("lateness"), "only first attempts, in seconds")
		assert.Len(t, m.observations("duration"), 2)
	})
}

// countingProvider is a MetricsProvider that keeps sums in a map.
type countingProvider struct {
	mu   sync.Mutex
	vals map[string]int
	obs  map[string][]float64
}

func newCountingProvider() *countingProvider {
	return &countingProvider{vals: map[string]int{}, obs: map[string][]float64{}}
}

type cmetric struct {
	p    *countingProvider
	name string
}

func (c cmetric) add(n int) { c.p.mu.Lock(); c.p.vals[c.name] += n; c.p.mu.Unlock() }
func (c cmetric) Inc()      { c.add(1) }
func (c cmetric) Dec()      { c.add(-1) }
func (c cmetric) Observe(v float64) {
	c.p.mu.Lock()
	c.p.obs[c.name] = append(c.p.obs[c.name], v)
	c.p.mu.Unlock()
}

func (p *countingProvider) get(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.vals[name]
}

func (p *countingProvider) observations(name string) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.obs[name]
}

func (p *countingProvider) NewDepthMetric(string) timedqueue.Gauge     { return cmetric{p, "depth"} }
func (p *countingProvider) NewRunningMetric(string) timedqueue.Gauge   { return cmetric{p, "running"} }
func (p *countingProvider) NewAddsMetric(string) timedqueue.Counter    { return cmetric{p, "adds"} }
func (p *countingProvider) NewRetriesMetric(string) timedqueue.Counter { return cmetric{p, "retries"} }
func (p *countingProvider) NewFailuresMetric(string) timedqueue.Counter {
	return cmetric{p, "failures"}
}
func (p *countingProvider) NewDropsMetric(string) timedqueue.Counter { return cmetric{p, "drops"} }
func (p *countingProvider) NewLatenessMetric(string) timedqueue.Histogram {
	return cmetric{p, "lateness"}
}
func (p *countingProvider) NewDurationMetric(string) timedqueue.Histogram {
	return cmetric{p, "duration"}
}

// The failure hook may call any method of the queue, Shutdown included: the
// hook's own slot does not make Shutdown wait for the hook.
func TestFailureHookMayCallShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var q *timedqueue.TimedWorkerQueue[string]
		got := make(chan error, 1)
		hook := func(timedqueue.TimedWorker[string], error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			got <- q.Shutdown(ctx)
		}
		var err error
		q, err = timedqueue.New(func(context.Context, string) error { return timedqueue.Permanent(errors.New("boom")) },
			timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()), timedqueue.WithFailureHook(hook))
		require.NoError(t, err)
		require.True(t, q.AddWork("a", t0, t0))
		assert.NoError(t, <-got, "Shutdown called from the failure hook")
		synctest.Wait()
		require.NoError(t, q.Shutdown(context.Background()), "after the hook returned")
		assert.False(t, q.AddWork("b", t0, t0))
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

// racingClock is a FakeClock on which another goroutine's Step lands between
// the queue's clock read and its timer Reset: the next Reset first steps the
// clock by stepOnReset.
type racingClock struct {
	*testingclock.FakeClock
	stepOnReset atomic.Int64
}

type racingTimer struct {
	clock.Timer
	c *racingClock
}

func (c *racingClock) NewTimer(d time.Duration) clock.Timer {
	return &racingTimer{c.FakeClock.NewTimer(d), c}
}

func (t *racingTimer) Reset(d time.Duration) bool {
	if s := t.c.stepOnReset.Swap(0); s != 0 {
		t.c.FakeClock.Step(time.Duration(s))
	}
	return t.Timer.Reset(d)
}

// A Step that races with AddWork (it lands while the queue arms its timer)
// does not delay the work: it starts when the clock reaches FireAt.
func TestStepDuringAddWorkDoesNotDelayWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &racingClock{FakeClock: testingclock.NewFakeClock(t0)}
		started := make(chan time.Duration, 1)
		q, err := timedqueue.New(func(context.Context, string) error {
			started <- clk.Since(t0)
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		defer func() { require.NoError(t, q.Shutdown(context.Background())) }()
		clk.stepOnReset.Store(int64(time.Second))
		require.True(t, q.AddWork("a", t0, t0.Add(10*time.Second)))
		require.Equal(t, time.Second, clk.Since(t0), "the racing Step happened")
		clk.Step(9 * time.Second) // FireAt
		synctest.Wait()
		select {
		case at := <-started:
			assert.Equal(t, 10*time.Second, at)
		default:
			t.Fatal("work due at +10s had not started at +10s")
		}
	})
}

// The same race in the timer goroutine: a Step that lands while it re-arms the
// timer for the next schedule does not delay that schedule.
func TestStepDuringTimerRearmDoesNotDelayWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &racingClock{FakeClock: testingclock.NewFakeClock(t0)}
		started := make(chan time.Duration, 2)
		q, err := timedqueue.New(func(context.Context, string) error {
			started <- clk.Since(t0)
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		defer func() { require.NoError(t, q.Shutdown(context.Background())) }()
		require.True(t, q.AddWork("a", t0, t0.Add(10*time.Second)))
		require.True(t, q.AddWork("b", t0, t0.Add(20*time.Second)))
		clk.stepOnReset.Store(int64(time.Second)) // lands when "a" fires and the timer is re-armed for "b"
		clk.Step(10 * time.Second)
		synctest.Wait()
		<-started // a; it may read the clock before or after the racing Step
		require.Equal(t, 11*time.Second, clk.Since(t0), "the racing Step happened")
		clk.Step(9 * time.Second) // b's FireAt
		synctest.Wait()
		select {
		case at := <-started:
			assert.Equal(t, 20*time.Second, at)
		default:
			t.Fatal("work due at +20s had not started at +20s")
		}
	})
}

// A key type that holds interfaces (K = any, or a struct with an interface
// field) can carry a dynamic value that is not comparable, such as a slice.
// Such a key is refused without a panic and without locking the queue up.
func TestUncomparableKeyIsRefused(t *testing.T) {
	type wrapped struct{ v any }
	for _, tc := range []struct {
		name string
		bad  any
		good any
	}{
		{"any", []int{1}, "k"},
		{"struct with an interface field", wrapped{map[int]int{}}, wrapped{"k"}},
		{"array of any", [1]any{func() {}}, [1]any{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(t0)
				ran := make(chan any, 1)
				q, err := timedqueue.New(func(_ context.Context, k any) error { ran <- k; return nil },
					timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
				require.NoError(t, err)
				// Each call is checked at once: a call after one that left the
				// mutex locked would block for ever.
				for name, call := range map[string]func() bool{
					"AddWork":    func() bool { return q.AddWork(tc.bad, t0, t0) },
					"UpdateWork": func() bool { return q.UpdateWork(tc.bad, t0, t0) },
					"CancelWork": func() bool { return q.CancelWork(tc.bad) },
					"GetWorker":  func() bool { _, ok := q.GetWorker(tc.bad); return ok },
				} {
					assert.NotPanics(t, func() { assert.False(t, call(), name) }, name)
					require.True(t, timedqueue.Unlocked(q), "%s left the queue's mutex locked", name)
				}
				assert.Equal(t, 0, q.Len())
				require.True(t, q.AddWork(tc.good, t0, t0))
				assert.Equal(t, tc.good, <-ran)
				require.NoError(t, q.Shutdown(context.Background()))
			})
		})
	}
}

// GetWorker returns CreatedAt, FireAt and NextAttempt with the caller's own
// *time.Location, however many distinct Locations the caller uses (time.Parse
// of a numeric offset makes a new one on each call).
func TestTimesKeepTheCallersLocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		var fires []time.Time
		for i := range 300 {
			ft, err := time.Parse(time.RFC3339, "2025-01-01T05:30:10+05:30") // t0+10s
			require.NoError(t, err)
			fires = append(fires, ft)
			require.True(t, q.AddWork(fmt.Sprint(i), ft.Add(-time.Hour), ft))
		}
		for i, ft := range fires {
			w, ok := q.GetWorker(fmt.Sprint(i))
			require.True(t, ok)
			require.Same(t, ft.Location(), w.FireAt.Location(), "FireAt of %d", i)
			require.Same(t, ft.Location(), w.CreatedAt.Location(), "CreatedAt of %d", i)
			require.Equal(t, ft, w.FireAt)
		}
		f.script("299", errors.New("retry me"))
		step(clk, 10*time.Second)
		w, ok := q.GetWorker("299")
		require.True(t, ok)
		assert.Equal(t, 1, w.Attempts)
		assert.Same(t, fires[299].Location(), w.NextAttempt.Location(), "NextAttempt after a retry")
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

// The queue's goroutines start on demand: a queue with nothing pending,
// running or backing off runs none, so it needs no Shutdown (synctest.Test
// fails if a goroutine of the bubble outlives it).
func TestIdleQueueRunsNoGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name string
		use  func(clk *testingclock.FakeClock, q *timedqueue.TimedWorkerQueue[string], f *fake)
		opts []timedqueue.Option
	}{
		{"never used", func(*testingclock.FakeClock, *timedqueue.TimedWorkerQueue[string], *fake) {}, nil},
		{"due work ran", func(clk *testingclock.FakeClock, q *timedqueue.TimedWorkerQueue[string], _ *fake) {
			q.AddWork("a", t0, t0)
		}, nil},
		{"future work ran", func(clk *testingclock.FakeClock, q *timedqueue.TimedWorkerQueue[string], _ *fake) {
			q.AddWork("a", t0, t0.Add(time.Second))
			q.AddWork("b", t0, t0.Add(2*time.Second))
			step(clk, time.Second)
			step(clk, time.Second)
		}, nil},
		{"future work cancelled", func(clk *testingclock.FakeClock, q *timedqueue.TimedWorkerQueue[string], _ *fake) {
			q.AddWork("a", t0, t0.Add(time.Second))
			synctest.Wait()
			q.CancelWork("a")
		}, nil},
		{"retried then succeeded", func(clk *testingclock.FakeClock, q *timedqueue.TimedWorkerQueue[string], f *fake) {
			f.script("a", errors.New("once"))
			q.AddWork("a", t0, t0)
			synctest.Wait() // fails at +0s, retried at +1s
			step(clk, time.Second)
		}, nil},
		{"timer rearmed many times", func(clk *testingclock.FakeClock, q *timedqueue.TimedWorkerQueue[string], f *fake) {
			for i := range 20 {
				q.AddWork(fmt.Sprint(i), t0, t0.Add(time.Duration(20-i)*time.Second))
				synctest.Wait()
			}
			step(clk, 20*time.Second)
		}, nil},
		{"attempt timed out", func(clk *testingclock.FakeClock, q *timedqueue.TimedWorkerQueue[string], f *fake) {
			gate := f.setGate("a")
			q.AddWork("a", t0, t0)
			step(clk, time.Second) // the timeout cancels the ctx; the work waits for its gate
			close(gate)
		}, []timedqueue.Option{timedqueue.WithAttemptTimeout(time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(t0)
				f := newFake(clk)
				q, err := timedqueue.New(f.work, append([]timedqueue.Option{timedqueue.WithClock(clk),
					timedqueue.WithLogger(logr.Discard())}, tc.opts...)...)
				require.NoError(t, err)
				tc.use(clk, q, f)
				synctest.Wait()
				assert.Equal(t, 0, q.Len())
				assert.Equal(t, 0, clk.Waiters(), "timer armed")
				// No Shutdown: the bubble must have no goroutine left.
			})
		})
	}
}

// A NaN key is not equal to itself: it could be added but never found again
// (never cancelled, never released), so it is refused like an uncomparable key.
func TestNaNKeyIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := testingclock.NewFakeClock(t0)
		ran := make(chan float64, 4)
		q, err := timedqueue.New(func(_ context.Context, k float64) error { ran <- k; return nil },
			timedqueue.WithClock(clk))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })

		nan := math.NaN()
		assert.False(t, q.AddWork(nan, t0, t0), "AddWork(NaN)")
		assert.False(t, q.UpdateWork(nan, t0, t0), "UpdateWork(NaN)")
		assert.False(t, q.CancelWork(nan), "CancelWork(NaN)")
		_, ok := q.GetWorker(nan)
		assert.False(t, ok, "GetWorker(NaN)")
		assert.Equal(t, 0, q.Len())

		// Ordinary keys, signed zeros included, still work.
		require.True(t, q.AddWork(0.0, t0, t0))
		synctest.Wait()
		assert.Equal(t, 0.0, <-ran)
		assert.Equal(t, 0, q.Len())
	})
}

// A clock that moves on every reading, as a real clock does, can make the
// queue arm its timer, start its timer goroutine, and then find the work due
// after all. The goroutine must still exit: an idle queue holds none.
func TestTimerGoroutineExitsWhenArmedWorkTurnsDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := &movingClock{FakeClock: testingclock.NewFakeClock(t0), step: time.Microsecond}
		done := make(chan struct{}, 1)
		q, err := timedqueue.New(func(context.Context, string) error { done <- struct{}{}; return nil },
			timedqueue.WithClock(clk))
		require.NoError(t, err)
		before := runtime.NumGoroutine()

		require.True(t, q.AddWork("a", t0, clk.Now().Add(1500*time.Nanosecond)))
		<-done
		synctest.Wait()
		assert.Equal(t, 0, q.Len())
		assert.Equal(t, before, runtime.NumGoroutine(), "a goroutine outlived the work")
		// No Shutdown: synctest.Test fails if the timer goroutine is still there.
	})
}

// movingClock is a FakeClock whose every Now reading first moves it by step.
type movingClock struct {
	*testingclock.FakeClock
	step time.Duration
}

func (c *movingClock) Now() time.Time {
	c.FakeClock.Step(c.step)
	return c.FakeClock.Now()
}

func (c *movingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

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

func TestAddWorkInvalidKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, err := timedqueue.New(func(context.Context, any) error { return nil },
			timedqueue.WithClock(testingclock.NewFakeClock(t0)))
		require.NoError(t, err)
		for _, key := range []any{math.NaN(), []int{1}} {
			assert.False(t, q.AddWork(key, t0, t0), "%v", key)
			assert.False(t, q.UpdateWork(key, t0, t0), "%v", key)
			assert.False(t, q.CancelWork(key), "%v", key)
			_, ok := q.GetWorker(key)
			assert.False(t, ok, "%v", key)
		}
		assert.Equal(t, 0, q.Len())
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

// The retry hook is called once the retry is scheduled: a test that waits for
// it and then moves the clock to NextAttempt sees the retry start, with any
// number of slots. The hook may call the queue, and a panic in it is
// recovered.
func TestRetryHook(t *testing.T) {
	for _, slots := range []int{1, 4} {
		t.Run(fmt.Sprint("slots=", slots), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				type call struct {
					w, seen timedqueue.TimedWorker[string]
					err     error
				}
				calls := make(chan call, 1)
				var q *timedqueue.TimedWorkerQueue[string]
				hook := func(w timedqueue.TimedWorker[string], err error) {
					seen, _ := q.GetWorker(w.Key)
					calls <- call{w, seen, err}
					if w.Attempts == 2 {
						panic("hook panic")
					}
				}
				clk, f, q0, fl := setup(t, timedqueue.WithMaxConcurrency(slots), timedqueue.WithRetryHook(hook),
					timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Second}))
				q = q0
				errs := []error{errors.New("1"), errors.New("2"), errors.New("3")}
				f.script("a", errs...)
				require.True(t, q.AddWork("a", t0, t0))
				for n := 1; n <= 3; n++ {
					c := <-calls
					wantNext := clk.Now().Add(time.Duration(1<<(n-1)) * time.Second)
					want := timedqueue.TimedWorker[string]{Key: "a", CreatedAt: t0, FireAt: t0, Attempts: n, NextAttempt: wantNext}
					assert.Equal(t, want, c.w, "hook argument after attempt %d", n)
					assert.Equal(t, want, c.seen, "GetWorker from the hook after attempt %d", n)
					assert.Equal(t, errs[n-1], c.err)
					clk.SetTime(wantNext) // no synctest.Wait before: the retry is armed
				}
				synctest.Wait()
				assert.Equal(t, []run{{"a", 0}, {"a", time.Second}, {"a", 3 * time.Second}, {"a", 7 * time.Second}}, f.takeRuns())
				assert.Empty(t, fl.get(), "the fourth attempt succeeded")
				assert.Len(t, calls, 0)
			})
		})
	}
}

// A retry hook that shuts the queue down drops the retry it was told about.
func TestRetryHookMayCallShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q *timedqueue.TimedWorkerQueue[string]
		got := make(chan error, 1)
		m := newCountingProvider()
		clk, f, q0, _ := setup(t, timedqueue.WithMetricsProvider(m),
			timedqueue.WithRetryHook(func(timedqueue.TimedWorker[string], error) {
				got <- q.Shutdown(context.Background())
			}))
		q = q0
		f.script("a", errors.New("fail"))
		require.True(t, q.AddWork("a", t0, t0))
		require.NoError(t, <-got)
		step(clk, time.Hour)
		assert.Equal(t, []run{{"a", 0}}, f.takeRuns())
		assert.Equal(t, 1, m.get("drops"))
		assert.Equal(t, 0, q.Len())
	})
}
