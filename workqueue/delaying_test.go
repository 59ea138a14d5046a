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

// The delaying semantics both interfaces document: AddAfter's item is
// ready at its time and not before, the earlier time wins, and an Add of a
// waiting item makes it ready now (one item, not two).

func TestAddAfterNeverBeforeItsTime(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddAfter("a", 10*time.Second)
		got := getAsync(q)
		clk.Step(10*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.True(t, pending(got), "ready before its time")
		assert.Zero(t, q.Len(), "a waiting item is not counted")
		clk.Step(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, "a", <-got)
	})
}

func TestAddAfterInOrderOfTime(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddAfter("c", 3*time.Second)
		q.AddAfter("a", time.Second)
		q.AddAfter("b", 2*time.Second)
		q.AddAfter("b2", 2*time.Second) // same time: in the order added
		clk.Step(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"a", "b", "b2", "c"}, drain(t, q))
	})
}

func TestAddAfterEarlierWins(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddAfter("a", time.Hour)
		q.AddAfter("a", time.Second)
		q.AddAfter("a", time.Minute) // later: ignored
		at, ok := q.Due("a")
		require.True(t, ok)
		assert.True(t, at.Equal(t0.Add(time.Second)), "due %v", at)
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, drain(t, q))
		clk.Step(2 * time.Hour)
		synctest.Wait()
		assert.Zero(t, q.Len(), "one item, handed out once")
	})
}

// kubernetes/kubernetes#126027: AddAfter(5h) then Add leaves two entries
// in client-go's queue, the second handed out five hours later.
func TestAddOfAWaitingItemMakesItReadyOnce(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddAfter("a", 5*time.Hour)
		q.Add("a")
		assert.Equal(t, 1, q.Len())
		assert.Equal(t, []string{"a"}, drain(t, q))
		clk.Step(5 * time.Hour)
		synctest.Wait()
		assert.Zero(t, q.Len())
	})
}

func TestAddAfterNotPositiveIsAdd(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.AddAfter("a", 0)
		q.AddAfter("b", -time.Second)
		assert.Equal(t, []string{"a", "b"}, drain(t, q))
	})
}

// An item added after a delay while it is processed waits for its time
// and for Done, whichever is later.
func TestAddAfterWhileProcessing(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.Add("a")
		get(t, q)
		q.AddAfter("a", time.Second)
		q.AddAfter("b", 2*time.Second)
		clk.Step(time.Second)
		synctest.Wait()
		got := getAsync(q)
		synctest.Wait()
		assert.True(t, pending(got), "a is due, but processed")
		q.Done("a")
		synctest.Wait()
		assert.Equal(t, "a", <-got)

		q.Add("c")
		get(t, q)
		q.AddAfter("c", 10*time.Second)
		q.Done("c")
		clk.Step(9 * time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"b"}, drain(t, q), "c waits after Done")
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"c"}, drain(t, q))
	})
}

// The timer is armed for the earliest item at every change: moving an
// item earlier, adding one that comes first, and when the clock is stepped
// past several at once.
func TestTimerFollowsTheEarliestItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, clk := newQueue(t, constructors[0].new)
		q.AddAfter("late", time.Hour)
		q.AddAfter("early", time.Minute)
		got := getAsync(q)
		clk.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, "early", <-got)
		q.Done("early")
		q.AddAfter("late", time.Second) // earlier now
		got = getAsync(q)
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, "late", <-got)
		q.Done("late")
		for i, d := range []time.Duration{3, 1, 2} {
			q.AddAfter(string(rune('x'+i)), d*time.Second)
		}
		clk.Step(time.Hour)
		synctest.Wait()
		assert.Equal(t, []string{"y", "z", "x"}, drain(t, q))
	})
}
