package workqueue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// constructors are the two queues, by the interface they stand in for.
var constructors = []struct {
	name string
	new  func(workqueue.Config[string]) *workqueue.Queue[string]
}{
	{"client-go", workqueue.NewRateLimiting[string]},
	{"controller-runtime", workqueue.NewPriority[string]},
}

// newQueue returns a queue of newQ on a FakeClock at t0, shut down (if not
// already) when the test ends: inside synctest.Test that is the leak check
// of its goroutine.
func newQueue(t *testing.T, newQ func(workqueue.Config[string]) *workqueue.Queue[string]) (*workqueue.Queue[string], *testingclock.FakeClock) {
	t.Helper()
	cfg := configAt(t0)
	clk := cfg.Clock.(*testingclock.FakeClock)
	q := newQ(cfg)
	t.Cleanup(func() {
		if !q.ShuttingDown() {
			q.ShutDown()
		}
	})
	return q, clk
}

// get calls Get and fails the test if it reports shutdown.
func get(t *testing.T, q *workqueue.Queue[string]) string {
	t.Helper()
	item, shutdown := q.Get()
	require.False(t, shutdown, "Get reported shutdown")
	return item
}

// getAsync calls Get on a goroutine; the channel receives what it returns.
func getAsync(q *workqueue.Queue[string]) <-chan string {
	ch := make(chan string, 1)
	go func() {
		item, shutdown := q.Get()
		if shutdown {
			item = "<shutdown>"
		}
		ch <- item
	}()
	return ch
}

// pending reports whether a receive from ch would block.
func pending(ch <-chan string) bool {
	select {
	case v := <-ch:
		panic("not pending: got " + v)
	default:
		return true
	}
}

// drain gets every item ready now, calling Done on each, and returns them
// in order. Items must be ready: Len says how many.
func drain(t *testing.T, q *workqueue.Queue[string]) []string {
	t.Helper()
	var got []string
	for q.Len() > 0 {
		item := get(t, q)
		got = append(got, item)
		q.Done(item)
	}
	return got
}

// configAt returns a Config with a FakeClock at t.
func configAt(t time.Time) workqueue.Config[string] {
	return workqueue.Config[string]{Clock: testingclock.NewFakeClock(t)}
}

// eachQueue runs test in a synctest bubble on a queue of each constructor,
// on a FakeClock at t0.
func eachQueue(t *testing.T, test func(t *testing.T, q *workqueue.Queue[string], clk *testingclock.FakeClock)) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q, clk := newQueue(t, c.new)
				test(t, q, clk)
			})
		})
	}
}
