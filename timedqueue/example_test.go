package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

// Evict pods once their toleration runs out, on a fake clock.
func Example() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	evicted := make(chan string)
	q, err := timedqueue.New(func(ctx context.Context, pod string) error {
		evicted <- fmt.Sprintf("evicted %s at +%v", pod, clk.Since(t0))
		return nil
	}, timedqueue.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer q.Shutdown(context.Background())

	q.AddWork("default/web-1", t0, t0.Add(5*time.Minute))
	q.AddWork("default/web-2", t0, t0.Add(time.Minute))
	fmt.Println("pending:", q.Len())

	clk.Step(time.Minute)
	fmt.Println(<-evicted)
	clk.Step(4 * time.Minute)
	fmt.Println(<-evicted)
	// Output:
	// pending: 2
	// evicted default/web-2 at +1m0s
	// evicted default/web-1 at +5m0s
}

func ExampleNew() {
	q, err := timedqueue.New(func(ctx context.Context, key int) error { return nil },
		timedqueue.WithMaxConcurrency(0))
	fmt.Println(q == nil, err)

	q, err = timedqueue.New(func(ctx context.Context, key int) error { return nil },
		timedqueue.WithMaxConcurrency(16),
		timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}),
		timedqueue.WithAttemptTimeout(30*time.Second))
	fmt.Println(err)
	fmt.Println(q.Shutdown(context.Background()))
	// Output:
	// true timedqueue: MaxConcurrency must be at least 1, got 0
	// <nil>
	// <nil>
}

func ExampleTimedWorkerQueue_UpdateWork() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	ran := make(chan string)
	q, _ := timedqueue.New(func(ctx context.Context, pod string) error {
		ran <- fmt.Sprintf("%s at +%v", pod, clk.Since(t0))
		return nil
	}, timedqueue.WithClock(clk))
	defer q.Shutdown(context.Background())

	q.AddWork("a", t0, t0.Add(time.Minute))
	q.AddWork("b", t0, t0.Add(time.Minute))
	fmt.Println(q.UpdateWork("a", t0, t0.Add(3*time.Minute)))  // later
	fmt.Println(q.UpdateWork("b", t0, t0.Add(30*time.Second))) // earlier
	fmt.Println(q.UpdateWork("b", t0, t0.Add(30*time.Second))) // same FireAt: no change

	clk.Step(30 * time.Second)
	fmt.Println(<-ran)
	clk.Step(150 * time.Second)
	fmt.Println(<-ran)
	// Output:
	// true
	// true
	// false
	// b at +30s
	// a at +3m0s
}

func ExampleTimedWorkerQueue_CancelWork() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	ran := make(chan string)
	q, _ := timedqueue.New(func(ctx context.Context, pod string) error {
		ran <- fmt.Sprintf("%s at +%v", pod, clk.Since(t0))
		return nil
	}, timedqueue.WithClock(clk))
	defer q.Shutdown(context.Background())

	q.AddWork("tolerated-now", t0, t0.Add(time.Minute))
	q.AddWork("evict", t0, t0.Add(2*time.Minute))
	fmt.Println(q.CancelWork("tolerated-now")) // will never start
	fmt.Println(q.CancelWork("unknown"))

	clk.Step(2 * time.Minute)
	fmt.Println(<-ran)
	// Output:
	// true
	// false
	// evict at +2m0s
}

// The hooks are typed by the queue's key: a hook for another key type does
// not compile, and SetFailureHook(nil) removes the hook.
func ExampleTimedWorkerQueue_SetRetryHook() {
	type podKey struct{ Namespace, Name string }
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	ran := make(chan string)
	retry := make(chan time.Time)
	failed := make(chan string)
	attempts := 0
	q, _ := timedqueue.New(func(ctx context.Context, pod podKey) error {
		attempts++
		ran <- fmt.Sprintf("attempt %d at +%v", attempts, clk.Since(t0))
		if attempts < 3 {
			return errors.New("API server unavailable")
		}
		return timedqueue.Permanent(errors.New("pod has a finalizer"))
	},
		timedqueue.WithClock(clk),
		timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second}))
	defer q.Shutdown(context.Background())
	// Called once the retry is scheduled: a clock step made after it is seen.
	q.SetRetryHook(func(w timedqueue.TimedWorker[podKey], err error) {
		retry <- w.NextAttempt
	})
	q.SetFailureHook(func(w timedqueue.TimedWorker[podKey], err error) {
		failed <- fmt.Sprintf("gave up on %s/%s after %d attempts: %v", w.Key.Namespace, w.Key.Name, w.Attempts, err)
	})

	q.AddWork(podKey{"default", "web-1"}, t0, t0)
	fmt.Println(<-ran)
	for range 2 {
		next := <-retry // after InitialBackoff, then twice as long
		fmt.Printf("retry at +%v\n", next.Sub(t0))
		clk.SetTime(next)
		fmt.Println(<-ran)
	}
	fmt.Println(<-failed) // a Permanent error is not retried
	// Output:
	// attempt 1 at +0s
	// retry at +1s
	// attempt 2 at +1s
	// retry at +3s
	// attempt 3 at +3s
	// gave up on default/web-1 after 3 attempts: pod has a finalizer
}

// An admit func that paces starts, one per 500 ms on the queue's clock, in
// the order they come due. Attempts it refuses wait in the queue, holding no
// slot. A token bucket (golang.org/x/time/rate's Limiter.ReserveN) plugs in
// the same way: admit when a token is there, else return when the next comes.
func ExampleTimedWorkerQueue_SetAdmitFunc() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	started := make(chan string)
	refused := make(chan string, 3)
	q, _ := timedqueue.New(func(ctx context.Context, pod string) error {
		started <- fmt.Sprintf("%s at +%v", pod, clk.Since(t0))
		return nil
	}, timedqueue.WithClock(clk))
	defer q.Shutdown(context.Background())
	const interval = 500 * time.Millisecond
	var next time.Time // the admit func is asked one call at a time
	q.SetAdmitFunc(func(pod string, fireAt, now time.Time) time.Time {
		if now.Before(next) {
			refused <- pod
			return next // ask again then
		}
		next = now.Add(interval)
		return time.Time{} // start now
	})

	for _, pod := range []string{"web-1", "web-2", "web-3"} {
		q.AddWork(pod, t0, t0) // all due now
	}
	fmt.Println(<-started)
	fmt.Println("refused:", <-refused, <-refused)
	clk.Step(500 * time.Millisecond)
	fmt.Println(<-started)
	fmt.Println("refused:", <-refused)
	clk.Step(500 * time.Millisecond)
	fmt.Println(<-started)
	// Output:
	// web-1 at +0s
	// refused: web-2 web-3
	// web-2 at +500ms
	// refused: web-3
	// web-3 at +1s
}
