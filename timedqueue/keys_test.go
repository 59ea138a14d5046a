package timedqueue_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

// A key type that holds interfaces (K = any, or a struct with an interface
// field) can carry a dynamic value that is not comparable, such as a slice.
// Such a key is refused without a panic and without locking the queue up.
func TestUncomparableKeyIsRefused(t *testing.T) {
	type wrapped struct{ v any }
	for _, tc := range []struct {
		name string
		bad  any
		good any
	}{
		{"any", []int{1}, "k"},
		{"struct with an interface field", wrapped{map[int]int{}}, wrapped{"k"}},
		{"array of any", [1]any{func() {}}, [1]any{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(t0)
				ran := make(chan any, 1)
				q, err := timedqueue.New(func(_ context.Context, k any) error { ran <- k; return nil },
					timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
				require.NoError(t, err)
				// Each call is checked at once: a call after one that left the
				// mutex locked would block for ever.
				for name, call := range map[string]func() bool{
					"AddWork":    func() bool { return q.AddWork(tc.bad, t0, t0) },
					"UpdateWork": func() bool { return q.UpdateWork(tc.bad, t0, t0) },
					"CancelWork": func() bool { return q.CancelWork(tc.bad) },
					"GetWorker":  func() bool { _, ok := q.GetWorker(tc.bad); return ok },
				} {
					assert.NotPanics(t, func() { assert.False(t, call(), name) }, name)
					require.True(t, timedqueue.Unlocked(q), "%s left the queue's mutex locked", name)
				}
				assert.Equal(t, 0, q.Len())
				require.True(t, q.AddWork(tc.good, t0, t0))
				assert.Equal(t, tc.good, <-ran)
				require.NoError(t, q.Shutdown(context.Background()))
			})
		})
	}
}

// A NaN key is not equal to itself: it could be added but never found again
// (never cancelled, never released), so it is refused like an uncomparable key.
func TestNaNKeyIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := testingclock.NewFakeClock(t0)
		ran := make(chan float64, 4)
		q, err := timedqueue.New(func(_ context.Context, k float64) error { ran <- k; return nil },
			timedqueue.WithClock(clk))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })

		nan := math.NaN()
		assert.False(t, q.AddWork(nan, t0, t0), "AddWork(NaN)")
		assert.False(t, q.UpdateWork(nan, t0, t0), "UpdateWork(NaN)")
		assert.False(t, q.CancelWork(nan), "CancelWork(NaN)")
		_, ok := q.GetWorker(nan)
		assert.False(t, ok, "GetWorker(NaN)")
		assert.Equal(t, 0, q.Len())

		// Ordinary keys, signed zeros included, still work.
		require.True(t, q.AddWork(0.0, t0, t0))
		synctest.Wait()
		assert.Equal(t, 0.0, <-ran)
		assert.Equal(t, 0, q.Len())
	})
}

func TestAddWorkInvalidKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, err := timedqueue.New(func(context.Context, any) error { return nil },
			timedqueue.WithClock(testingclock.NewFakeClock(t0)))
		require.NoError(t, err)
		for _, key := range []any{math.NaN(), []int{1}} {
			assert.False(t, q.AddWork(key, t0, t0), "%v", key)
			assert.False(t, q.UpdateWork(key, t0, t0), "%v", key)
			assert.False(t, q.CancelWork(key), "%v", key)
			_, ok := q.GetWorker(key)
			assert.False(t, ok, "%v", key)
		}
		assert.Equal(t, 0, q.Len())
		require.NoError(t, q.Shutdown(context.Background()))
	})
}
