package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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
		// NumGoroutine counts the whole process, whose other goroutines
		// (a test before this one winding down) may exit meanwhile: no more
		// than before. And no Shutdown: synctest.Test fails if the timer
		// goroutine, in the bubble, is still there.
		assert.LessOrEqual(t, runtime.NumGoroutine(), before, "a goroutine outlived the work")
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
