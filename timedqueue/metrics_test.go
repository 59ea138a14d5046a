package timedqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

// namingProvider records the name each metric is created for, and returns
// nil for every metric: nil records nothing.
type namingProvider struct {
	mu    sync.Mutex
	calls []string
}

func (p *namingProvider) add(metric, name string) {
	p.mu.Lock()
	p.calls = append(p.calls, metric+"("+name+")")
	p.mu.Unlock()
}

func (p *namingProvider) NewDepthMetric(n string) timedqueue.Gauge   { p.add("depth", n); return nil }
func (p *namingProvider) NewRunningMetric(n string) timedqueue.Gauge { p.add("running", n); return nil }
func (p *namingProvider) NewAddsMetric(n string) timedqueue.Counter  { p.add("adds", n); return nil }
func (p *namingProvider) NewRetriesMetric(n string) timedqueue.Counter {
	p.add("retries", n)
	return nil
}
func (p *namingProvider) NewFailuresMetric(n string) timedqueue.Counter {
	p.add("failures", n)
	return nil
}
func (p *namingProvider) NewDropsMetric(n string) timedqueue.Counter { p.add("drops", n); return nil }
func (p *namingProvider) NewLatenessMetric(n string) timedqueue.Histogram {
	p.add("lateness", n)
	return nil
}
func (p *namingProvider) NewDurationMetric(n string) timedqueue.Histogram {
	p.add("duration", n)
	return nil
}

// Every metric is created for the queue's name (WithName); nil metrics record
// nothing and break nothing.
func TestMetricsCarryName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		p := &namingProvider{}
		attempts := make(chan string, 2)
		q, err := timedqueue.New(func(_ context.Context, k string) error { attempts <- k; return errors.New("fails") },
			timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()), timedqueue.WithName("evictions"),
			timedqueue.WithMetricsProvider(p), timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 2}))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })
		assert.ElementsMatch(t, []string{
			"depth(evictions)", "running(evictions)", "adds(evictions)", "retries(evictions)",
			"failures(evictions)", "drops(evictions)", "lateness(evictions)", "duration(evictions)",
		}, p.calls)
		q.AddWork("a", t0, t0)
		synctest.Wait()
		clk.Step(time.Second)
		synctest.Wait()
		assert.Len(t, attempts, 2, "retried once, with nil metrics")
		assert.Zero(t, q.Len(), "then failed for good")
	})
}

// backoffProvider implements BackoffMetricsProvider: its backoff gauge is
// real, the others record nothing.
type backoffProvider struct {
	namingProvider
	mu      sync.Mutex
	backoff int
}

var _ timedqueue.BackoffMetricsProvider = (*backoffProvider)(nil)

func (p *backoffProvider) NewBackoffMetric(string) timedqueue.Gauge { return backoffGauge{p} }

func (p *backoffProvider) value() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backoff
}

type backoffGauge struct{ p *backoffProvider }

func (g backoffGauge) Inc() { g.p.mu.Lock(); g.p.backoff++; g.p.mu.Unlock() }
func (g backoffGauge) Dec() { g.p.mu.Lock(); g.p.backoff--; g.p.mu.Unlock() }

// A provider implementing BackoffMetricsProvider gets a gauge of the
// schedules backing off, which GetWorker shows as not running with
// Attempts > 0, through every way in and out: a failure, a deferral after
// a failure, a start, a final failure, CancelWork, UpdateWork (which
// resets Attempts) and Shutdown.
func TestBackoffMetric(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		p := &backoffProvider{}
		var mu sync.Mutex
		tries := map[string]int{}
		q, err := timedqueue.New(func(_ context.Context, k string) error {
			mu.Lock()
			tries[k]++
			n := tries[k]
			mu.Unlock()
			if k == "d" && n == 2 {
				return timedqueue.RetryAt(t0.Add(time.Hour), errors.New("not yet"))
			}
			return errors.New("fails")
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()), timedqueue.WithMetricsProvider(p),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Second}))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })
		keys := []string{"a", "b", "c", "d", "e"}
		backingOff := func() int {
			n := 0
			for _, k := range keys {
				if w, ok := q.GetWorker(k); ok && w.Attempts > 0 && !w.Running {
					n++
				}
			}
			return n
		}
		check := func(what string, want int) {
			t.Helper()
			require.Equal(t, want, backingOff(), "%s: schedules backing off, as GetWorker shows them", what)
			assert.Equal(t, want, p.value(), "%s: the backoff gauge", what)
		}

		for _, k := range keys[:4] {
			q.AddWork(k, t0, t0)
		}
		q.AddWork("e", t0, t0.Add(time.Hour)) // pending: not backing off
		synctest.Wait()
		check("a, b, c and d failed once", 4)
		assert.True(t, q.CancelWork("a"))
		check("a cancelled", 3)
		assert.True(t, q.UpdateWork("b", t0, t0.Add(time.Hour)))
		check("b rescheduled, its attempts reset", 2)
		clk.Step(time.Second) // c fails again; d defers after its failure
		synctest.Wait()
		check("c failed twice, d deferred", 2)
		clk.Step(time.Second) // c's third and last attempt fails
		synctest.Wait()
		check("c failed for good", 1)
		require.NoError(t, q.Shutdown(context.Background()))
		check("shut down", 0)
	})
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCountingProvider()
		clk, f, q, _ := setup(t, timedqueue.WithMetricsProvider(m))
		f.script("a", errors.New("once"))
		q.AddWork("a", t0, t0.Add(time.Second))
		q.AddWork("b", t0, t0.Add(time.Hour))
		q.UpdateWork("b", t0, t0.Add(2*time.Hour))
		assert.Equal(t, 3, m.get("adds"))
		assert.Equal(t, 2, m.get("depth"))
		step(clk, 3*time.Second) // a: late by 2s, fails; retried at +4s
		assert.Equal(t, 1, m.get("retries"))
		assert.Equal(t, 2, m.get("depth"))
		gate := f.setGate("a")
		step(clk, time.Second)
		assert.Equal(t, 1, m.get("running"))
		assert.Equal(t, 1, m.get("depth"))
		close(gate)
		synctest.Wait()
		assert.Equal(t, 0, m.get("running"))
		assert.Equal(t, []float64{2}, m.observations("lateness"), "only first attempts, in seconds")
		assert.Len(t, m.observations("duration"), 2)
	})
}

// countingProvider is a MetricsProvider that keeps sums in a map.
type countingProvider struct {
	mu   sync.Mutex
	vals map[string]int
	obs  map[string][]float64
}

func newCountingProvider() *countingProvider {
	return &countingProvider{vals: map[string]int{}, obs: map[string][]float64{}}
}

type cmetric struct {
	p    *countingProvider
	name string
}

func (c cmetric) add(n int) { c.p.mu.Lock(); c.p.vals[c.name] += n; c.p.mu.Unlock() }
func (c cmetric) Inc()      { c.add(1) }
func (c cmetric) Dec()      { c.add(-1) }
func (c cmetric) Observe(v float64) {
	c.p.mu.Lock()
	c.p.obs[c.name] = append(c.p.obs[c.name], v)
	c.p.mu.Unlock()
}

func (p *countingProvider) get(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.vals[name]
}

func (p *countingProvider) observations(name string) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.obs[name]
}

func (p *countingProvider) NewDepthMetric(string) timedqueue.Gauge     { return cmetric{p, "depth"} }
func (p *countingProvider) NewRunningMetric(string) timedqueue.Gauge   { return cmetric{p, "running"} }
func (p *countingProvider) NewAddsMetric(string) timedqueue.Counter    { return cmetric{p, "adds"} }
func (p *countingProvider) NewRetriesMetric(string) timedqueue.Counter { return cmetric{p, "retries"} }
func (p *countingProvider) NewFailuresMetric(string) timedqueue.Counter {
	return cmetric{p, "failures"}
}
func (p *countingProvider) NewDropsMetric(string) timedqueue.Counter { return cmetric{p, "drops"} }
func (p *countingProvider) NewLatenessMetric(string) timedqueue.Histogram {
	return cmetric{p, "lateness"}
}
func (p *countingProvider) NewDurationMetric(string) timedqueue.Histogram {
	return cmetric{p, "duration"}
}
