package priority_test

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/taintkit/taintkit/workqueue"
	"github.com/taintkit/taintkit/workqueue/priority"
)

// A Queue is what controller-runtime's controller looks for in the queue
// its NewQueue returns, and takes its AddOpts as they are.
func TestAddWithOpts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := testingclock.NewFakeClock(t0)
		var q priorityqueue.PriorityQueue[string] = priority.New(workqueue.Config[string]{Clock: clk})
		q.AddWithOpts(priorityqueue.AddOpts{Priority: new(-100)}, "low")
		q.AddWithOpts(priorityqueue.AddOpts{After: time.Second, Priority: new(1)}, "later")
		q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, "limited") // 5 ms, controller-runtime's default
		clk.Step(time.Second)
		synctest.Wait()
		var got []string
		for range 3 {
			item, p, shutdown := q.GetWithPriority()
			assert.False(t, shutdown)
			got = append(got, item+"@"+strconv.Itoa(p))
		}
		assert.Equal(t, []string{"later@1", "limited@0", "low@-100"}, got)
		q.ShutDown()
		_, _, shutdown := q.GetWithPriority()
		assert.True(t, shutdown, "at once, as controller-runtime's")
		assert.Panics(t, q.ShutDown, "a second ShutDown, as controller-runtime's")
	})
}
