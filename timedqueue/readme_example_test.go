package timedqueue_test

import (
	"context"
	"fmt"
	"log"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

// README.md quotes the body of Example_quickStart, and CONTRIBUTING.md
// that of TestReadmeFakeClock, verbatim; the root package's
// TestReadmeCodeIsTested fails if they drift apart.

func Example_quickStart() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0) // leave WithClock out to use the real clock
	evicted := make(chan string)
	q, err := timedqueue.New(func(ctx context.Context, pod string) error {
		evicted <- fmt.Sprintf("evict %s at +%v", pod, clk.Since(t0))
		return nil // an error is retried with backoff; timedqueue.Permanent(err) is not
	}, timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(16))
	if err != nil {
		log.Fatal(err)
	}
	defer q.Shutdown(context.Background())

	q.AddWork("default/web-1", t0, t0.Add(5*time.Minute)) // due at +5m
	q.AddWork("default/web-2", t0, t0.Add(5*time.Minute))
	q.UpdateWork("default/web-1", t0, t0.Add(10*time.Minute)) // moved later (or earlier)
	fmt.Println(q.CancelWork("default/web-2"))                // true: it will never start

	clk.Step(10 * time.Minute)
	fmt.Println(<-evicted)
	// Output:
	// true
	// evict default/web-1 at +10m0s
}

func TestReadmeFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := testingclock.NewFakeClock(t0)
		ran := make(chan string, 1)
		q, err := timedqueue.New(func(_ context.Context, k string) error { ran <- k; return nil },
			timedqueue.WithClock(clk))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })

		q.AddWork("pod-a", t0, t0.Add(10*time.Second))
		clk.Step(10*time.Second - time.Nanosecond)
		synctest.Wait()
		require.Len(t, ran, 0, "ran before FireAt")
		clk.Step(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, "pod-a", <-ran)
	})
}
