package workqueue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

// What neither client-go's nor controller-runtime's queue can do: take an
// item back, and put one off.

func TestScheduleLaterPostpones(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddAfter("a", time.Minute)
		q.Schedule("a", t0.Add(time.Hour))
		at, ok := q.Due("a")
		require.True(t, ok)
		assert.True(t, at.Equal(t0.Add(time.Hour)))
		clk.Step(time.Hour - time.Nanosecond)
		synctest.Wait()
		assert.Zero(t, q.Len(), "handed out at the postponed time")
		clk.Step(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, drain(t, q))
	})
}

func TestScheduleEarlier(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.Schedule("a", t0.Add(time.Hour))
		q.Schedule("a", t0.Add(time.Second))
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, drain(t, q))
		clk.Step(time.Hour)
		synctest.Wait()
		assert.Zero(t, q.Len())
	})
}

func TestScheduleAReadyItemMakesItWait(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.Add("a")
		q.Add("b")
		q.Schedule("a", t0.Add(time.Minute))
		assert.Equal(t, []string{"b"}, drain(t, q))
		clk.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, drain(t, q))
	})
}

func TestScheduleNowOrPast(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.Add("first")
		q.Schedule("past", t0.Add(-time.Hour))
		q.AddAfter("waiting", time.Hour)
		q.Schedule("waiting", t0)
		q.Schedule("first", t0.Add(-time.Minute)) // already ready: keeps its place
		assert.Equal(t, []string{"first", "past", "waiting"}, drain(t, q))
	})
}

// The controller's case: the item is processed, and the reconciler reads
// when its object is next due.
func TestScheduleWhileProcessing(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.Add("a")
		get(t, q)
		q.AddAfter("a", time.Second) // an event that a retry wanted
		q.Schedule("a", t0.Add(time.Minute))
		q.Done("a")
		clk.Step(time.Second)
		synctest.Wait()
		assert.Zero(t, q.Len())
		clk.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, drain(t, q))
	})
}

func TestCancelWaiting(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddAfter("a", time.Second)
		q.AddAfter("b", 2*time.Second)
		assert.True(t, q.Cancel("a"))
		assert.False(t, q.Cancel("a"), "already taken back")
		assert.False(t, q.Cancel("never-added"))
		_, ok := q.Due("a")
		assert.False(t, ok)
		clk.Step(time.Hour)
		synctest.Wait()
		assert.Equal(t, []string{"b"}, drain(t, q))
	})
}

func TestCancelReady(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.Add("a")
		q.Add("b")
		assert.True(t, q.Cancel("a"))
		assert.Equal(t, 1, q.Len())
		assert.Equal(t, []string{"b"}, drain(t, q))
		q.Add("a") // added again: handed out again
		assert.Equal(t, []string{"a"}, drain(t, q))
	})
}

// An item being processed is not interrupted; Cancel takes back what would
// have followed its Done.
func TestCancelWhileProcessing(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.Add("a")
		get(t, q)
		assert.False(t, q.Cancel("a"), "nothing to follow")
		q.Add("a")
		q.AddAfter("b", time.Second)
		assert.True(t, q.Cancel("a"))
		q.Done("a")
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"b"}, drain(t, q))
	})
}

func TestCancelTheEarliestRearmsTheTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, clk := newQueue(t, constructors[0].new)
		q.AddAfter("a", time.Second)
		q.AddAfter("b", time.Minute)
		q.Cancel("a")
		got := getAsync(q)
		clk.Step(time.Second)
		synctest.Wait()
		assert.True(t, pending(got))
		clk.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, "b", <-got)
	})
}

func TestDue(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		_, ok := q.Due("a")
		assert.False(t, ok, "absent")
		q.AddAfter("a", time.Minute)
		at, ok := q.Due("a")
		assert.True(t, ok && at.Equal(t0.Add(time.Minute)), "waiting: %v", at)
		clk.Step(time.Hour)
		synctest.Wait()
		at, ok = q.Due("a")
		assert.True(t, ok && at.Equal(t0.Add(time.Minute)), "ready since its time: %v", at)
		get(t, q)
		_, ok = q.Due("a")
		assert.False(t, ok, "processed, nothing to follow")
		q.Add("a")
		at, ok = q.Due("a")
		assert.True(t, ok && at.Equal(t0.Add(time.Hour)), "ready now, held: %v", at)
	})
}
