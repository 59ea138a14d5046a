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
