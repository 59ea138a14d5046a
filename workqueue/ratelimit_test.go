package workqueue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	clientworkqueue "k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

func TestAddRateLimited(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(t0)
				rl := clientworkqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Hour)
				q := c.new(workqueue.Config[string]{Clock: clk, RateLimiter: rl})
				defer q.ShutDown()
				q.AddRateLimited("a") // 1 s
				q.AddRateLimited("a") // 2 s: the earlier wins
				q.AddRateLimited("b") // 1 s
				assert.Equal(t, 2, q.NumRequeues("a"))
				clk.Step(time.Second)
				synctest.Wait()
				assert.Equal(t, []string{"a", "b"}, drain(t, q))
				q.Forget("a")
				assert.Zero(t, q.NumRequeues("a"))
				assert.Equal(t, 1, q.NumRequeues("b"))
			})
		})
	}
}

// RateLimited with After: the shorter of the two, as controller-runtime's
// queue does.
func TestRateLimitedWithAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		rl := clientworkqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Minute, time.Hour)
		q := workqueue.NewPriority(workqueue.Config[string]{Clock: clk, RateLimiter: rl})
		defer q.ShutDown()
		q.AddWithOpts(workqueue.AddOpts{RateLimited: true, After: time.Second}, "short-after")
		q.AddWithOpts(workqueue.AddOpts{RateLimited: true, After: time.Hour}, "short-limiter")
		at, _ := q.Due("short-after")
		assert.True(t, at.Equal(t0.Add(time.Second)), "%v", at)
		at, _ = q.Due("short-limiter")
		assert.True(t, at.Equal(t0.Add(time.Minute)), "%v", at)
	})
}

// Without a RateLimiter, each constructor takes the default of the queue it
// stands in for: client-go's controller rate limiter, or controller-runtime's
// per-item exponential backoff from 5 ms.
func TestDefaultRateLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range constructors {
			q, clk := newQueue(t, c.new)
			for range 4 {
				q.AddRateLimited("a")
			}
			clk.Step(5 * time.Millisecond)
			synctest.Wait()
			assert.Equal(t, []string{"a"}, drain(t, q), c.name)
			assert.Equal(t, 4, q.NumRequeues("a"))
		}
	})
}
