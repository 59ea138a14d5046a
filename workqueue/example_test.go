package workqueue_test

import (
	"fmt"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

// A reconciler's object changes its time to a later one: Schedule puts its
// item off, where AddAfter would keep the earlier time and hand the item
// out for nothing.
func ExampleQueue_Schedule() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	q := workqueue.NewRateLimiting(workqueue.Config[string]{Clock: clk})
	defer q.ShutDown()

	q.AddAfter("default/web", 10*time.Second)
	q.Schedule("default/web", t0.Add(time.Minute))
	at, _ := q.Due("default/web")
	fmt.Println("due at", at.Sub(t0))

	clk.Step(10 * time.Second)
	fmt.Println("ready at 10s:", q.Len())
	clk.Step(50 * time.Second)
	item, _ := q.Get()
	fmt.Println("handed out", item, "at", clk.Since(t0))
	q.Done(item)
	// Output:
	// due at 1m0s
	// ready at 10s: 0
	// handed out default/web at 1m0s
}

// A reconciler's object is deleted: Cancel takes its item back, which is
// then not handed out at all.
func ExampleQueue_Cancel() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	q := workqueue.NewRateLimiting(workqueue.Config[string]{Clock: clk})
	defer q.ShutDown()

	q.AddAfter("default/web", 10*time.Second)
	q.AddAfter("default/db", 20*time.Second)
	fmt.Println("taken back:", q.Cancel("default/web"))

	clk.Step(20 * time.Second)
	item, _ := q.Get()
	fmt.Println("handed out", item)
	q.Done(item)
	fmt.Println("left:", q.Len())
	// Output:
	// taken back: true
	// handed out default/db
	// left: 0
}
