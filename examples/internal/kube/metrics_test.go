package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
)

type fakeStats struct {
	stats        manager.Stats
	pending      int
	failing      int
	failingSince time.Time
}

func (f fakeStats) Stats() manager.Stats              { return f.stats }
func (f fakeStats) ScheduledEvictions() int           { return f.pending }
func (f fakeStats) Failing() (n int, since time.Time) { return f.failing, f.failingSince }

func TestMetricsManagerCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := kube.NewMetrics(reg)
	require.NoError(t, err)

	// Before a manager runs, the counters read zero and the replica does
	// not lead.
	kubetest.RequireValue(t, reg, 0, kube.MetricEvictions, "outcome", "evicted")
	kubetest.RequireValue(t, reg, 0, kube.MetricEvictionsPending)
	kubetest.RequireValue(t, reg, 0, kube.MetricLeader)

	m.SetManager(fakeStats{
		stats: manager.Stats{
			Evicted: 7 + 8 + 9, Deleted: 7, EvictedByAPI: 8, FallbackDeleted: 9, Refused: 10, DryRun: 11, BudgetWaits: 12,
			Gone: 1, Terminating: 2, Rescheduled: 3, Dropped: 4, Cancelled: 5, Failed: 6, ResyncFound: 13, NodeReads: 14,
		},
		pending:      42,
		failing:      2,
		failingSince: time.Unix(1700000000, 500000000),
	})
	m.SetLeader(true)
	// Evicted, the sum, is not an outcome of its own: each removal is
	// counted once, under how it was removed.
	expected := `
# HELP taintkit_evictions_total Evictions of the taint manager by outcome.
# TYPE taintkit_evictions_total counter
taintkit_evictions_total{outcome="cancelled"} 5
taintkit_evictions_total{outcome="deleted"} 7
taintkit_evictions_total{outcome="dropped"} 4
taintkit_evictions_total{outcome="dry_run"} 11
taintkit_evictions_total{outcome="evicted"} 8
taintkit_evictions_total{outcome="failed"} 6
taintkit_evictions_total{outcome="fallback_delete"} 9
taintkit_evictions_total{outcome="gone"} 1
taintkit_evictions_total{outcome="refused"} 10
taintkit_evictions_total{outcome="rescheduled"} 3
taintkit_evictions_total{outcome="terminating"} 2
# HELP taintkit_evictions_pending Evictions scheduled, running or waiting for a retry.
# TYPE taintkit_evictions_pending gauge
taintkit_evictions_pending 42
# HELP taintkit_eviction_budget_waits_total Evictions that had to wait for a token of the eviction budget.
# TYPE taintkit_eviction_budget_waits_total counter
taintkit_eviction_budget_waits_total 12
# HELP taintkit_leader 1 while this replica's manager runs (it holds the lease, or leader election is off), else 0.
# TYPE taintkit_leader gauge
taintkit_leader 1
# HELP taintkit_evictions_missed_total Pods the resync found that had to go and had no eviction scheduled.
# TYPE taintkit_evictions_missed_total counter
taintkit_evictions_missed_total 13
# HELP taintkit_evictions_failing Scheduled evictions whose attempts keep failing.
# TYPE taintkit_evictions_failing gauge
taintkit_evictions_failing 2
# HELP taintkit_evictions_failing_since_timestamp_seconds When the eviction failing longest started failing (Unix seconds); 0 if none.
# TYPE taintkit_evictions_failing_since_timestamp_seconds gauge
taintkit_evictions_failing_since_timestamp_seconds 1.7000000005e+09
# HELP taintkit_node_reads_total Nodes read from the API server before evicting a pod bound after its taint.
# TYPE taintkit_node_reads_total counter
taintkit_node_reads_total 14
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected),
		kube.MetricEvictions, kube.MetricEvictionsPending, kube.MetricEvictionBudgetWaits, kube.MetricLeader,
		kube.MetricEvictionsMissed, kube.MetricEvictionsFailing, kube.MetricEvictionsFailingSince, kube.MetricNodeReads))
}

// The manager's delay and wait observations land in histograms in seconds.
func TestMetricsHistograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := kube.NewMetrics(reg)
	require.NoError(t, err)
	var obs manager.Metrics = m // what manager.Config.Metrics takes
	obs.EvictionDelay(0.005)
	obs.EvictionDelay(90)
	obs.BudgetWait(0.25)

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string][2]float64{} // count, sum
	for _, f := range families {
		if h := f.GetMetric()[0].GetHistogram(); h != nil && len(f.GetMetric()) == 1 {
			got[f.GetName()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
		}
	}
	assert.Equal(t, [2]float64{2, 90.005}, got[kube.MetricEvictionDelay])
	assert.Equal(t, [2]float64{1, 0.25}, got[kube.MetricEvictionBudgetWait])
}

func TestMetricsRegisterOncePerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := kube.NewMetrics(reg)
	require.NoError(t, err)
	_, err = kube.NewMetrics(reg)
	var already prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &already)
	_, err = kube.NewMetrics(prometheus.NewRegistry())
	assert.NoError(t, err, "a second registry is independent")
}

// The adapter is a timedqueue.MetricsProvider: a queue's depth, adds,
// retries and timings appear under the queue's name.
func TestMetricsTimedQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := kube.NewMetrics(reg)
		require.NoError(t, err)
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := testingclock.NewFakeClock(t0)
		fail := true
		q, err := timedqueue.New(func(context.Context, string) error {
			if fail {
				fail = false
				return errors.New("API server unavailable")
			}
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithName("evictions"), timedqueue.WithMetricsProvider(m.Queue()),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Second}))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })

		q.AddWork("default/web", t0, t0.Add(10*time.Second))
		q.AddWork("default/db", t0, t0.Add(time.Hour))
		synctest.Wait()
		kubetest.RequireValue(t, reg, 2, kube.MetricQueuePending, "queue", "evictions")
		kubetest.RequireValue(t, reg, 2, kube.MetricQueueAdds, "queue", "evictions")

		clk.Step(10 * time.Second) // web fails once
		synctest.Wait()
		kubetest.RequireValue(t, reg, 1, kube.MetricQueueRetries, "queue", "evictions")
		kubetest.RequireValue(t, reg, 2, kube.MetricQueuePending, "queue", "evictions") // db, and web backing off
		kubetest.RequireValue(t, reg, 1, kube.MetricQueueBackoff, "queue", "evictions") // web
		kubetest.RequireValue(t, reg, 0, kube.MetricQueueRunning, "queue", "evictions")

		clk.Step(time.Second) // web succeeds
		synctest.Wait()
		kubetest.RequireValue(t, reg, 1, kube.MetricQueuePending, "queue", "evictions")
		kubetest.RequireValue(t, reg, 0, kube.MetricQueueBackoff, "queue", "evictions")
		kubetest.RequireValue(t, reg, 1, kube.MetricQueueLateness, "queue", "evictions")     // one first attempt
		kubetest.RequireValue(t, reg, 2, kube.MetricQueueWorkDuration, "queue", "evictions") // two attempts
		kubetest.RequireValue(t, reg, 0, kube.MetricQueueFailures, "queue", "evictions")

		require.NoError(t, q.Shutdown(context.Background()))
		kubetest.RequireValue(t, reg, 1, kube.MetricQueueDrops, "queue", "evictions") // db never ran
		kubetest.RequireValue(t, reg, 0, kube.MetricQueuePending, "queue", "evictions")
	})
}

// The adapter is a sharding.MetricsProvider: each lane's depth, handle
// durations, retries and drops; and, as a DropCauseMetricsProvider and a
// BackoffMetricsProvider, the causes of the drops and the items waiting for
// a retry.
func TestMetricsDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := kube.NewMetrics(reg)
		require.NoError(t, err)
		clk := testingclock.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		release := make(chan struct{})
		failures := 0
		d, err := sharding.New(sharding.Config[string, string]{
			Shards:  1,
			HighKey: func(node string) string { return node },
			LowKey: func(pod string) string {
				if pod == "" {
					panic("no pod")
				}
				return "node-1"
			},
			HandleHigh: func(context.Context, string) error {
				<-release
				return nil
			},
			HandleLow: func(context.Context, string) error {
				failures++
				return errors.New("lister not ready")
			},
			Clock:   clk,
			Retry:   sharding.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second, MaxBackoff: time.Second},
			Metrics: m.Dispatcher(),
			Name:    "updates",
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})

		d.AddHigh("node-1") // taken by the worker, which blocks in it
		synctest.Wait()
		d.AddHigh("node-2")
		d.AddLow("default/web")
		synctest.Wait()
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherDepth, "dispatcher", "updates", "lane", "high")
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherDepth, "dispatcher", "updates", "lane", "low")

		close(release)
		synctest.Wait()
		kubetest.RequireValue(t, reg, 0, kube.MetricDispatcherDepth, "dispatcher", "updates", "lane", "high")
		kubetest.RequireValue(t, reg, 2, kube.MetricDispatcherHandleDuration, "dispatcher", "updates", "lane", "high")
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherRetries, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherBackoff, "dispatcher", "updates", "lane", "low")

		clk.Step(time.Second) // the second and last attempt fails too
		synctest.Wait()
		assert.Equal(t, 2, failures)
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherDrops, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherFailures, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 0, kube.MetricDispatcherDepth, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 0, kube.MetricDispatcherBackoff, "dispatcher", "updates", "lane", "low")

		d.AddLow("")           // its key func panics: refused
		d.AddLow("default/db") // fails, waits for a retry, and is dropped at shutdown
		synctest.Wait()
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherRefusals, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherBackoff, "dispatcher", "updates", "lane", "low")
		cancel()
		<-done
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherShutdownDrops, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 0, kube.MetricDispatcherBackoff, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 1, kube.MetricDispatcherFailures, "dispatcher", "updates", "lane", "low")
		kubetest.RequireValue(t, reg, 3, kube.MetricDispatcherDrops, "dispatcher", "updates", "lane", "low") // the sum
	})
}
