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
