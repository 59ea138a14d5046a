package workqueue_test

import (
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

// The priority semantics controller-runtime's queue documents: the highest
// priority first, FIFO within one, the higher of two priorities kept, a
// raised item last among its new priority's, the earlier of two times.

func prio(p int) *int { return &p }

// getP calls GetWithPriority and fails the test if it reports shutdown.
func getP(t *testing.T, q *workqueue.Queue[string]) (string, int) {
	t.Helper()
	item, p, shutdown := q.GetWithPriority()
	require.False(t, shutdown)
	return item, p
}

func TestHighestPriorityFirst(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		for _, after := range []time.Duration{0, time.Second} {
			for i := range 3 {
				for _, p := range []int{-10, 0, 10} {
					q.AddWithOpts(workqueue.AddOpts{Priority: prio(p), After: after}, fmt.Sprintf("p%d-%d", p, i))
				}
			}
			clk.Step(after)
			synctest.Wait()
			var got []string
			for range 9 {
				item, p := getP(t, q)
				got = append(got, fmt.Sprint(item, "@", p))
				q.Done(item)
			}
			assert.Equal(t, []string{
				"p10-0@10", "p10-1@10", "p10-2@10",
				"p0-0@0", "p0-1@0", "p0-2@0",
				"p-10-0@-10", "p-10-1@-10", "p-10-2@-10",
			}, got, "after %v", after)
		}
	})
}

func TestHigherPriorityIsKept(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(1)}, "up")
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(2)}, "up")
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(2)}, "down")
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(1)}, "down")
		q.Add("down") // Add is priority 0: no change either
		item, p := getP(t, q)
		assert.Equal(t, "up", item)
		assert.Equal(t, 2, p)
		item, p = getP(t, q)
		assert.Equal(t, "down", item)
		assert.Equal(t, 2, p)
	})
}

func TestRaisedPriorityGoesLastAmongItsNewPriority(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.Add("foo")
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(1)}, "bar")
		q.Add("baz")
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(1)}, "foo", "baz")
		var got []string
		for range 3 {
			item, _ := getP(t, q)
			got = append(got, item)
		}
		assert.Equal(t, []string{"bar", "foo", "baz"}, got)
	})
}

func TestEarlierTimeAndHigherPriorityMerge(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddWithOpts(workqueue.AddOpts{After: time.Hour, Priority: prio(0)}, "a")
		q.AddWithOpts(workqueue.AddOpts{After: time.Minute, Priority: prio(5)}, "a")
		q.AddWithOpts(workqueue.AddOpts{After: 2 * time.Minute, Priority: prio(-5)}, "a")
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(1)}, "b")
		clk.Step(time.Minute)
		synctest.Wait()
		item, p := getP(t, q)
		assert.Equal(t, "a", item)
		assert.Equal(t, 5, p)
	})
}

// A waiting item of a high priority that becomes ready goes before the
// lower ones already ready.
func TestHighPriorityItemThatBecomesReadyGoesFirst(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock) {
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(-100)}, "low")
		q.AddWithOpts(workqueue.AddOpts{After: time.Second}, "high")
		clk.Step(time.Second)
		synctest.Wait()
		item, _ := getP(t, q)
		assert.Equal(t, "high", item)
	})
}

// A new add of an item being processed starts from its own priority; a
// Schedule keeps the one it was handed out with.
func TestPriorityOfAnItemAddedWhileProcessing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, clk := newQueue(t, constructors[1].new)
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(7)}, "a")
		getP(t, q)
		q.Add("a")
		q.Done("a")
		_, p := getP(t, q)
		assert.Equal(t, 0, p, "Add: priority 0")
		q.Done("a")

		q.AddWithOpts(workqueue.AddOpts{Priority: prio(7)}, "a")
		getP(t, q)
		q.Schedule("a", t0.Add(time.Second))
		q.Done("a")
		clk.Step(time.Second)
		synctest.Wait()
		_, p = getP(t, q)
		assert.Equal(t, 7, p, "Schedule: the priority handed out with")
	})
}

func TestManyPriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, _ := newQueue(t, constructors[1].new)
		// More distinct priorities than lanes kept empty, in and out twice.
		for round := range 2 {
			for p := range 40 {
				q.AddWithOpts(workqueue.AddOpts{Priority: prio((p * 17) % 40)}, fmt.Sprint(round, "-", p))
			}
			last := 1 << 30
			for range 40 {
				_, p := getP(t, q)
				assert.Less(t, p, last)
				last = p
			}
		}
	})
}

// Priorities beyond an int32 are kept exactly and in order.
func TestPrioritiesOfEveryInt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, _ := newQueue(t, constructors[1].new)
		all := []int{math.MinInt, math.MinInt32, -1, 0, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt}
		for i, p := range all {
			q.AddWithOpts(workqueue.AddOpts{Priority: prio(p)}, fmt.Sprint(i))
		}
		q.AddWithOpts(workqueue.AddOpts{Priority: prio(math.MaxInt)}, "0") // raised to the top
		var got []int
		for range all {
			item, p := getP(t, q)
			got = append(got, p)
			q.Done(item)
		}
		assert.Equal(t, []int{math.MaxInt, math.MaxInt, math.MaxInt32 + 1, math.MaxInt32, 0, -1, math.MinInt32}, got)
		require.NoError(t, workqueue.CheckInvariants(q))
	})
}
