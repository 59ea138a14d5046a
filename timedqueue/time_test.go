package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

func TestNeverBeforeFireAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		require.True(t, q.AddWork("a", t0, t0.Add(10*time.Second)))
		step(clk, 10*time.Second-time.Nanosecond)
		assert.Empty(t, f.takeRuns(), "ran before FireAt")
		step(clk, time.Nanosecond)
		assert.Equal(t, []run{{"a", 10 * time.Second}}, f.takeRuns())
		assert.Equal(t, 0, q.Len(), "success releases the key")
		_, ok := q.GetWorker("a")
		assert.False(t, ok)
	})
}

func TestFireAtIsAbsolute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		// The original waited fireAt-createdAt from now: 1h10s here.
		require.True(t, q.AddWork("old", t0.Add(-time.Hour), t0.Add(10*time.Second)))
		// A FireAt in the past starts at once.
		require.True(t, q.AddWork("past", t0.Add(-2*time.Hour), t0.Add(-time.Hour)))
		synctest.Wait()
		assert.Equal(t, []run{{"past", 0}}, f.takeRuns())
		step(clk, 10*time.Second)
		assert.Equal(t, []run{{"old", 10 * time.Second}}, f.takeRuns())
	})
}

func TestGetWorkerKeepsTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, q, _ := setup(t)
		zone := time.FixedZone("UTC+3", 3*3600)
		created := time.Date(2024, 12, 31, 23, 0, 0, 0, time.Local)
		fire := time.Date(2025, 1, 1, 7, 0, 0, 123, zone)
		q.AddWork("a", created, fire)
		w, ok := q.GetWorker("a")
		require.True(t, ok)
		assert.Equal(t, created, w.CreatedAt)
		assert.Equal(t, fire, w.FireAt)
		assert.Equal(t, zone, w.FireAt.Location())
		// Far future: kept at full precision.
		far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
		q.AddWork("far", t0, far)
		w, _ = q.GetWorker("far")
		assert.Equal(t, far, w.FireAt)
	})
}

// GetWorker returns CreatedAt, FireAt and NextAttempt with the caller's own
// *time.Location, however many distinct Locations the caller uses (time.Parse
// of a numeric offset makes a new one on each call).
func TestTimesKeepTheCallersLocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, f, q, _ := setup(t)
		var fires []time.Time
		for i := range 300 {
			ft, err := time.Parse(time.RFC3339, "2025-01-01T05:30:10+05:30") // t0+10s
			require.NoError(t, err)
			fires = append(fires, ft)
			require.True(t, q.AddWork(fmt.Sprint(i), ft.Add(-time.Hour), ft))
		}
		for i, ft := range fires {
			w, ok := q.GetWorker(fmt.Sprint(i))
			require.True(t, ok)
			require.Same(t, ft.Location(), w.FireAt.Location(), "FireAt of %d", i)
			require.Same(t, ft.Location(), w.CreatedAt.Location(), "CreatedAt of %d", i)
			require.Equal(t, ft, w.FireAt)
		}
		f.script("299", errors.New("retry me"))
		step(clk, 10*time.Second)
		w, ok := q.GetWorker("299")
		require.True(t, ok)
		assert.Equal(t, 1, w.Attempts)
		assert.Same(t, fires[299].Location(), w.NextAttempt.Location(), "NextAttempt after a retry")
	})
}

func year(y int) time.Time { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC) }

// Due schedules waiting for a slot start in FireAt order, whatever the year:
// times before 1678 and after 2262 do not fit in int64 Unix nanoseconds.
func TestFireAtOrderOutsideTheNanosecondRange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		now   time.Time
		years []int // in the order added
	}{
		{"before 1678", t0, []int{1650, 1500, 1600}},
		{"after 2262", year(2500), []int{2400, 2300}},
		{"mixed", year(2500), []int{2400, 1650, 2025, 1500, 2300, 1600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(tc.now)
				gate := make(chan struct{})
				var order []int
				q, err := timedqueue.New(func(_ context.Context, y int) error {
					if y == 0 {
						<-gate // holds the only slot while the others are added
					} else {
						order = append(order, y)
					}
					return nil
				}, timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(1), timedqueue.WithLogger(logr.Discard()))
				require.NoError(t, err)
				require.True(t, q.AddWork(0, tc.now, tc.now))
				synctest.Wait()
				for _, y := range tc.years {
					require.True(t, q.AddWork(y, tc.now, year(y)))
				}
				close(gate)
				synctest.Wait()
				want := append([]int(nil), tc.years...)
				for i := range want { // insertion sort: a handful of years
					for j := i; j > 0 && want[j] < want[j-1]; j-- {
						want[j], want[j-1] = want[j-1], want[j]
					}
				}
				assert.Equal(t, want, order, "start order")
			})
		})
	}
}

// A schedule never starts before its FireAt, on a clock outside 1678–2262 too.
func TestNeverBeforeFireAtOutsideTheNanosecondRange(t *testing.T) {
	for _, tc := range []struct {
		now, fire time.Time
	}{
		{year(1500), year(1600)},
		{year(2500), year(2600)},
		{year(1500), year(1700)}, // a FireAt inside the range, from a clock before it
		{year(2100), year(2300)}, // and a FireAt after it, from a clock inside
	} {
		t.Run(fmt.Sprintf("clock %d, FireAt %d", tc.now.Year(), tc.fire.Year()), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(tc.now)
				ran := make(chan time.Time, 1)
				q, err := timedqueue.New(func(context.Context, string) error { ran <- clk.Now(); return nil },
					timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
				require.NoError(t, err)
				require.True(t, q.AddWork("a", tc.now, tc.fire))
				wait := tc.fire.Sub(tc.now)
				clk.Step(wait / 2)
				synctest.Wait()
				clk.Step(wait - wait/2 - time.Nanosecond)
				synctest.Wait()
				require.Len(t, ran, 0, "started before FireAt")
				clk.Step(time.Nanosecond)
				synctest.Wait()
				require.Len(t, ran, 1, "not started at FireAt")
				assert.True(t, (<-ran).Equal(tc.fire))
			})
		})
	}
}

// A zero createdAt or fireAt means the queue clock's now at the call: the work
// is due at once and no lateness of two thousand years is reported.
func TestZeroTimesMeanNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCountingProvider()
		clk, f, q, _ := setup(t, timedqueue.WithMetricsProvider(m), timedqueue.WithMaxConcurrency(1))
		gate := f.setGate("busy")
		require.True(t, q.AddWork("busy", t0, t0))
		synctest.Wait()
		require.True(t, q.AddWork("zero", time.Time{}, time.Time{}))
		w, ok := q.GetWorker("zero")
		require.True(t, ok)
		assert.Equal(t, t0, w.CreatedAt)
		assert.Equal(t, t0, w.FireAt)
		assert.Equal(t, t0, w.NextAttempt)
		require.True(t, q.UpdateWork("zero", time.Time{}, t0.Add(time.Second)))
		clk.Step(3 * time.Second)
		require.True(t, q.UpdateWork("zero", time.Time{}, time.Time{}), "a zero fireAt is the clock's now, not the FireAt")
		w, _ = q.GetWorker("zero")
		assert.Equal(t, t0.Add(3*time.Second), w.FireAt)
		assert.Equal(t, t0.Add(3*time.Second), w.CreatedAt)
		clk.Step(2 * time.Second)
		close(gate)
		synctest.Wait()
		assert.Equal(t, []float64{0, 2}, m.observations("lateness"), "seconds late: busy, zero")
	})
}

// Lateness is start − FireAt in seconds, at full precision, even for a
// FireAt before 1678.
func TestLatenessOfAncientFireAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCountingProvider()
		_, _, q, _ := setup(t, timedqueue.WithMetricsProvider(m))
		fire := time.Date(1500, 1, 1, 0, 0, 0, 250_000_000, time.UTC)
		require.True(t, q.AddWork("ancient", t0, fire))
		synctest.Wait()
		want := float64(t0.Unix()-fire.Unix()) - 0.25
		late := m.observations("lateness")
		require.Len(t, late, 1)
		assert.Equal(t, want, late[0], "lateness of a FireAt in 1500, in seconds")
	})
}
