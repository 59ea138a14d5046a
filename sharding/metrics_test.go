package sharding_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/sharding"
)

// namingProvider records the name and lane each metric is created for, and
// returns nil for every metric: nil records nothing.
type namingProvider struct {
	mu    sync.Mutex
	calls []string
}

func (p *namingProvider) add(metric, name string, lane sharding.Lane) {
	p.mu.Lock()
	p.calls = append(p.calls, metric+"("+name+", "+lane.String()+")")
	p.mu.Unlock()
}

func (p *namingProvider) NewDepthMetric(name string, lane sharding.Lane) sharding.Gauge {
	p.add("depth", name, lane)
	return nil
}
func (p *namingProvider) NewDurationMetric(name string, lane sharding.Lane) sharding.Histogram {
	p.add("duration", name, lane)
	return nil
}
func (p *namingProvider) NewRetriesMetric(name string, lane sharding.Lane) sharding.Counter {
	p.add("retries", name, lane)
	return nil
}
func (p *namingProvider) NewDropsMetric(name string, lane sharding.Lane) sharding.Counter {
	p.add("drops", name, lane)
	return nil
}

// Every metric is created for the dispatcher's Config.Name and a lane, and
// the name is in the log lines; nil metrics record nothing and break nothing.
// A provider that implements neither optional interface is asked for the
// four metrics of MetricsProvider only.
func TestMetricsAndLogsCarryName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		p := &namingProvider{}
		cfg.Metrics, cfg.Name = p, "updates"
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: 2}
		cfg.HandleHigh = func(context.Context, string) error { return errors.New("fails") }
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{
			"depth(updates, high)", "duration(updates, high)", "retries(updates, high)", "drops(updates, high)",
			"depth(updates, low)", "duration(updates, low)", "retries(updates, low)", "drops(updates, low)",
		}, p.calls)
		run(t, d)
		d.AddHigh("n")
		synctest.Wait()
		e.clk.Step(time.Second)
		synctest.Wait()
		require.Len(t, e.dropped(), 1, "retried, then dropped, with nil metrics")
		assert.Contains(t, e.logged(), `"dispatcher"="updates"`)
	})
}

// causeMetrics is a provider that implements both optional interfaces on
// top of fakeMetrics.
type causeMetrics struct {
	*fakeMetrics
	failures, shutdownDrops, refusals, backoff map[sharding.Lane]int
}

func newCauseMetrics() *causeMetrics {
	return &causeMetrics{fakeMetrics: newFakeMetrics(), failures: map[sharding.Lane]int{},
		shutdownDrops: map[sharding.Lane]int{}, refusals: map[sharding.Lane]int{}, backoff: map[sharding.Lane]int{}}
}

var (
	_ sharding.DropCauseMetricsProvider = (*causeMetrics)(nil)
	_ sharding.BackoffMetricsProvider   = (*causeMetrics)(nil)
)

func (m *causeMetrics) NewFailuresMetric(_ string, l sharding.Lane) sharding.Counter {
	return metricFunc{m.fakeMetrics, func(d int) { m.failures[l] += d }}
}
func (m *causeMetrics) NewShutdownDropsMetric(_ string, l sharding.Lane) sharding.Counter {
	return metricFunc{m.fakeMetrics, func(d int) { m.shutdownDrops[l] += d }}
}
func (m *causeMetrics) NewRefusalsMetric(_ string, l sharding.Lane) sharding.Counter {
	return metricFunc{m.fakeMetrics, func(d int) { m.refusals[l] += d }}
}
func (m *causeMetrics) NewBackoffMetric(_ string, l sharding.Lane) sharding.Gauge {
	return metricFunc{m.fakeMetrics, func(d int) { m.backoff[l] += d }}
}

// A provider implementing the optional interfaces gets each drop counted
// under its one cause (a final failure as timedqueue counts one, a drop at
// shutdown as timedqueue's drops, a refused add), and a gauge of the items
// waiting for a retry, which depth leaves out.
func TestDropCausesAndBackoffMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		m := newCauseMetrics()
		cfg := e.config()
		cfg.Metrics = m
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second, MaxBackoff: time.Second}
		cfg.LowKey = func(pod string) string {
			if pod == "bad" {
				panic("no node")
			}
			return keyOf(pod)
		}
		cfg.HandleLow = func(context.Context, string) error { return errors.New("lister not ready") }
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		stop := run(t, d)
		low := sharding.LaneLow
		check := func(what string, depth, backoff, retries, drops, failures, shutdownDrops, refusals int) {
			t.Helper()
			m.mu.Lock()
			defer m.mu.Unlock()
			got := []int{m.depth[low], m.backoff[low], m.retries[low], m.drops[low], m.failures[low], m.shutdownDrops[low], m.refusals[low]}
			assert.Equal(t, []int{depth, backoff, retries, drops, failures, shutdownDrops, refusals}, got,
				"%s: depth, backoff, retries, drops, failures, shutdown drops, refusals", what)
		}

		d.AddLow("n/a")
		synctest.Wait()
		check("a failed once", 0, 1, 1, 0, 0, 0, 0)
		d.AddLow("n/a") // cancels the retry: a runs at once, and fails again
		synctest.Wait()
		check("a added while backing off", 0, 1, 2, 0, 0, 0, 0)
		e.clk.Step(time.Second) // a's second attempt since the add fails: given up
		synctest.Wait()
		check("a given up", 0, 0, 2, 1, 1, 0, 0)

		d.AddLow("bad") // its key func panics: refused
		d.AddLow("n/b")
		synctest.Wait()
		check("b failed once", 0, 1, 3, 2, 1, 0, 1)
		stop() // b, waiting for its retry, is dropped
		check("stopped", 0, 0, 3, 3, 1, 1, 1)
		d.AddLow("n/c") // after Run returned: refused
		check("added after Run", 0, 0, 3, 4, 1, 1, 2)

		drops := e.dropped()
		require.Len(t, drops, 2, "OnDrop gets the failure and the shutdown drop, not the refusals")
		assert.NotErrorIs(t, drops[0].Err, sharding.ErrStopped)
		assert.ErrorIs(t, drops[1].Err, sharding.ErrStopped)
	})
}
