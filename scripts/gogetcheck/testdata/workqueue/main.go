// A first program over github.com/taintkit/taintkit/workqueue, as a user
// who has just run "go get github.com/taintkit/taintkit/workqueue" writes
// it: gogetcheck builds and runs it in a fresh module.
package main

import (
	"fmt"
	"os"
	"time"

	clientworkqueue "k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/taintkit/taintkit/workqueue"
	"github.com/taintkit/taintkit/workqueue/priority"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}

func run() error {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	var q clientworkqueue.TypedRateLimitingInterface[string] = workqueue.NewRateLimiting(workqueue.Config[string]{Clock: clk})
	defer q.ShutDown()
	wq := q.(*workqueue.Queue[string])

	// Put off one item, take another back: only the first is handed out,
	// at its new time.
	q.AddAfter("default/web", 10*time.Second)
	q.AddAfter("default/db", 10*time.Second)
	wq.Schedule("default/web", t0.Add(time.Minute))
	if !wq.Cancel("default/db") {
		return fmt.Errorf("workqueue: Cancel of a waiting item reported false")
	}
	clk.Step(10 * time.Second)
	if n := q.Len(); n != 0 {
		return fmt.Errorf("workqueue: %d items ready at +10s, want 0", n)
	}
	clk.Step(50 * time.Second)
	item, _ := q.Get()
	fmt.Println("workqueue: handed out", item, "at +", clk.Since(t0))
	if item != "default/web" {
		return fmt.Errorf("workqueue: handed out %q, want default/web", item)
	}
	q.Done(item)

	// The same queue as controller-runtime's priority queue.
	var pq priorityqueue.PriorityQueue[string] = priority.New(workqueue.Config[string]{Clock: clk})
	defer pq.ShutDown()
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(10)}, "urgent")
	pq.Add("routine")
	item, p, _ := pq.GetWithPriority()
	fmt.Println("priority: handed out", item, "at priority", p)
	if item != "urgent" || p != 10 {
		return fmt.Errorf("priority: handed out %q at %d, want urgent at 10", item, p)
	}
	return nil
}
