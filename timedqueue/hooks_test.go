package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
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

// The admit func is asked in start order, which for work due together is
// FireAt order, one call at a time, though the attempts run on many workers:
// a token handed out by it goes in that order.
func TestAdmitFuncIsAskedInStartOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var mu sync.Mutex
		var asked []time.Duration
		inside := 0
		q, err := timedqueue.New(func(context.Context, time.Duration) error { return nil },
			timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(8))
		require.NoError(t, err)
		q.SetAdmitFunc(func(key time.Duration, fireAt, now time.Time) time.Time {
			mu.Lock()
			inside++
			assert.Equal(t, 1, inside, "one call at a time")
			asked = append(asked, key)
			mu.Unlock()
			runtime.Gosched() // give another worker the chance to overtake
			mu.Lock()
			inside--
			mu.Unlock()
			assert.True(t, fireAt.Equal(t0.Add(key)), "the schedule's FireAt")
			return time.Time{}
		})
		const n = 200
		for i := range n {
			// Scheduled in reverse: the order must follow FireAt, not this.
			key := time.Duration(n-i) * time.Millisecond
			require.True(t, q.AddWork(key, t0, t0.Add(key)))
		}
		clk.Step(time.Second) // all due at once
		synctest.Wait()
		require.Len(t, asked, n)
		for i, key := range asked {
			require.Equal(t, time.Duration(i+1)*time.Millisecond, key, "call %d", i)
		}
		assert.Equal(t, 0, q.Len(), "every one admitted and run")
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

// A refusal is not an attempt: the schedule waits until the time the admit
// func gave, holding no slot, with no attempt counted and no hook called;
// then it asks again.
func TestAdmitRefusalWaitsWithoutFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		ran := make(chan string, 10)
		q, err := timedqueue.New(func(_ context.Context, key string) error {
			ran <- key
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(1),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 1}))
		require.NoError(t, err)
		hooks := 0
		q.SetRetryHook(func(timedqueue.TimedWorker[string], error) { hooks++ })
		q.SetFailureHook(func(timedqueue.TimedWorker[string], error) { hooks++ })
		refusals := 0
		q.SetAdmitFunc(func(key string, _, now time.Time) time.Time {
			if key == "slow" && refusals < 3 {
				refusals++
				return now.Add(10 * time.Second)
			}
			return time.Time{}
		})
		require.True(t, q.AddWork("slow", t0, t0))
		require.True(t, q.AddWork("other", t0, t0.Add(time.Second)))
		synctest.Wait()
		w, ok := q.GetWorker("slow")
		require.True(t, ok)
		assert.Equal(t, 0, w.Attempts, "a refusal is not a failed attempt")
		assert.False(t, w.Running)
		assert.True(t, w.NextAttempt.Equal(t0.Add(10*time.Second)), "NextAttempt %v", w.NextAttempt)
		assert.True(t, w.FireAt.Equal(t0))

		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, "other", <-ran, "the waiting one holds no slot (MaxConcurrency 1)")

		clk.Step(9*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Empty(t, ran, "never before the time the admit func gave")
		for range 3 {
			clk.Step(10 * time.Second)
			synctest.Wait()
		}
		assert.Equal(t, "slow", <-ran)
		assert.Equal(t, 3, refusals)
		assert.Equal(t, 0, hooks, "no retry or failure hook for a refusal")
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

// An admit func that panics or calls runtime.Goexit stops nothing: a panic
// admits the attempt, a Goexit fails it (retried as any failure), and the
// attempts after it are asked in turn.
func TestAdmitFuncPanicAndGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var mu sync.Mutex
		ran := map[string]int{}
		q, err := timedqueue.New(func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			ran[key]++
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(4), timedqueue.WithLogger(logr.Discard()),
			timedqueue.WithRetry(timedqueue.RetryPolicy{InitialBackoff: time.Second}))
		require.NoError(t, err)
		var failed []error
		q.SetRetryHook(func(w timedqueue.TimedWorker[string], err error) { failed = append(failed, err) })
		first := map[string]bool{}
		q.SetAdmitFunc(func(key string, _, _ time.Time) time.Time {
			if !first[key] {
				first[key] = true
				switch key {
				case "panics":
					panic("admit panicked")
				case "goexits":
					runtime.Goexit()
				}
			}
			return time.Time{}
		})
		for _, k := range []string{"panics", "goexits", "a", "b", "c"} {
			require.True(t, q.AddWork(k, t0, t0))
		}
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, map[string]int{"panics": 1, "a": 1, "b": 1, "c": 1}, ran, "a panic admits; a Goexit fails that attempt only")
		mu.Unlock()
		require.Len(t, failed, 1)
		clk.Step(time.Second)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, 1, ran["goexits"], "retried after its backoff")
		mu.Unlock()
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

// The admit func may call the queue's methods, and a nil hook removes it.
func TestAdmitFuncMayCallTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		done := make(chan string, 2)
		var q *timedqueue.TimedWorkerQueue[string]
		q, err := timedqueue.New(func(_ context.Context, key string) error {
			done <- key
			return nil
		}, timedqueue.WithClock(clk))
		require.NoError(t, err)
		q.SetAdmitFunc(func(key string, _, now time.Time) time.Time {
			w, ok := q.GetWorker(key)
			assert.True(t, ok && w.Running, "the asking attempt is running")
			q.CancelWork("victim")
			return now.Add(time.Hour)
		})
		require.True(t, q.AddWork("victim", t0, t0.Add(time.Minute)))
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		assert.Equal(t, 1, q.Len(), "a waits; victim was cancelled by the admit func")
		q.SetAdmitFunc(nil)
		clk.Step(time.Hour)
		synctest.Wait()
		assert.Equal(t, "a", <-done)
		require.NoError(t, q.Shutdown(context.Background()))
	})
}

// Shutdown drops a schedule that waits for the admit func, as any other
// waiting schedule, and Shutdown returns.
func TestAdmitWaitDroppedAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		q, err := timedqueue.New(func(context.Context, string) error {
			return errors.New("must not run")
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		q.SetAdmitFunc(func(_ string, _, now time.Time) time.Time { return now.Add(time.Minute) })
		require.True(t, q.AddWork("a", t0, t0))
		synctest.Wait()
		require.NoError(t, q.Shutdown(context.Background()))
		assert.Equal(t, 0, q.Len())
		clk.Step(time.Hour)
		synctest.Wait()
	})
}

// A refused schedule is back in line, waiting for the time it was given,
// before the next attempt is asked: refusals keep their order whatever the
// clock does meanwhile, so a rate limit's waiting list stays in FireAt order.
func TestAdmitRefusalIsBackInLineBeforeTheNextIsAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var q *timedqueue.TimedWorkerQueue[int]
		q, err := timedqueue.New(func(context.Context, int) error { return nil },
			timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(8))
		require.NoError(t, err)
		later := t0.Add(time.Second)
		var refused, again []int
		notInLine := ""
		q.SetAdmitFunc(func(key int, _, now time.Time) time.Time {
			if !now.Before(later) {
				again = append(again, key)
				return time.Time{}
			}
			if len(refused) > 0 { // the one refused just before: by induction, all of them
				k := refused[len(refused)-1]
				w, ok := q.GetWorker(k)
				if (!ok || w.Running || !w.NextAttempt.Equal(later)) && notInLine == "" {
					notInLine = fmt.Sprintf("asking for %d, %d (refused before) is %+v", key, k, w)
				}
			}
			refused = append(refused, key)
			return later
		})
		const n = 1000
		for i := range n {
			require.True(t, q.AddWork(i, t0, t0))
		}
		synctest.Wait()
		require.Len(t, refused, n)
		assert.Empty(t, notInLine)
		assert.Equal(t, n, q.Len())
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, 0, q.Len())
		assert.Equal(t, refused, again, "asked again in the order refused")
		require.NoError(t, q.Shutdown(context.Background()))
	})
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
