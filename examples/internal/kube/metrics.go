package kube

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
)

// Metric names, all prefixed taintkit_. Labels: queue (the timed queue's
// name), dispatcher (the dispatcher's name), lane ("high": nodes, "low":
// pods), outcome (see [MetricEvictions]).
const (
	// MetricEvictionsPending is a gauge: evictions scheduled, running or
	// waiting for a retry (the eviction queue's depth).
	MetricEvictionsPending = "taintkit_evictions_pending"
	// MetricEvictions counts the manager's evictions by outcome:
	//   - deleted: deleted directly (the default, as upstream);
	//   - evicted: evicted through the Eviction API (--use-eviction-api);
	//   - refused: refused by a PodDisruptionBudget (each refusal counts;
	//     the eviction is retried);
	//   - fallback_delete: deleted directly after budgets refused the
	//     eviction past --eviction-fallback-after;
	//   - dry_run: would have been removed (--dry-run), once per pod UID;
	//   - gone: the pod was already deleted;
	//   - terminating: the pod was already being deleted;
	//   - rescheduled: fired early (the pod changed), decided again;
	//   - dropped: no longer due when it fired;
	//   - cancelled: cancelled before it fired;
	//   - failed: its retries ran out.
	//
	// Pods removed are deleted + evicted + fallback_delete.
	MetricEvictions = "taintkit_evictions_total"
	// MetricEvictionDelay is a histogram of the time from each removed
	// pod's deadline (the end of its toleration, or when its untolerated
	// taint was seen) to its deletion or eviction, in seconds: queueing,
	// eviction budgets and budget refusals all show here. A dry run
	// observes when it would have removed the pod.
	MetricEvictionDelay = "taintkit_eviction_delay_seconds"
	// MetricEvictionBudgetWait is a histogram of how long evictions waited
	// for a token of the eviction budget (--eviction-rate), in seconds.
	MetricEvictionBudgetWait = "taintkit_eviction_budget_wait_seconds"
	// MetricEvictionBudgetWaits counts the evictions that had to wait for
	// a token of the eviction budget (when they start waiting; the
	// histogram observes them when they get it).
	MetricEvictionBudgetWaits = "taintkit_eviction_budget_waits_total"
	// MetricEvictionsMissed counts the pods the resync found that had to go
	// and had no eviction scheduled (an event missed, a give-up): it should
	// stay at 0.
	MetricEvictionsMissed = "taintkit_evictions_missed_total"
	// MetricEvictionsFailing is a gauge: scheduled evictions whose attempts
	// keep failing (refused by admission, throttled, the server failing);
	// each is retried until the pod goes or no longer has to.
	MetricEvictionsFailing = "taintkit_evictions_failing"
	// MetricEvictionsFailingSince is a gauge: when the eviction failing
	// longest started failing, in seconds since the Unix epoch; 0 if none
	// is failing.
	MetricEvictionsFailingSince = "taintkit_evictions_failing_since_timestamp_seconds"
	// MetricNodeReads counts the nodes read from the API server before
	// evicting a pod bound after its taint (the node cache may be behind).
	MetricNodeReads = "taintkit_node_reads_total"
	// MetricLeader is 1 while this replica's manager runs (it leads, or
	// leader election is off), else 0.
	MetricLeader = "taintkit_leader"

	// Metrics of a timedqueue.TimedWorkerQueue (label queue); the package
	// taintkit documentation says what each counts.
	MetricQueuePending      = "taintkit_timedqueue_pending"
	MetricQueueBackoff      = "taintkit_timedqueue_backoff"
	MetricQueueRunning      = "taintkit_timedqueue_running"
	MetricQueueAdds         = "taintkit_timedqueue_adds_total"
	MetricQueueRetries      = "taintkit_timedqueue_retries_total"
	MetricQueueFailures     = "taintkit_timedqueue_failures_total"
	MetricQueueDrops        = "taintkit_timedqueue_drops_total"
	MetricQueueLateness     = "taintkit_timedqueue_lateness_seconds"
	MetricQueueWorkDuration = "taintkit_timedqueue_work_duration_seconds"

	// Metrics of a sharding.Dispatcher (labels dispatcher and lane). Drops
	// are failures + shutdown drops + refusals.
	MetricDispatcherDepth          = "taintkit_dispatcher_depth"
	MetricDispatcherBackoff        = "taintkit_dispatcher_backoff"
	MetricDispatcherHandleDuration = "taintkit_dispatcher_handle_duration_seconds"
	MetricDispatcherRetries        = "taintkit_dispatcher_retries_total"
	MetricDispatcherDrops          = "taintkit_dispatcher_drops_total"
	MetricDispatcherFailures       = "taintkit_dispatcher_failures_total"
	MetricDispatcherShutdownDrops  = "taintkit_dispatcher_shutdown_drops_total"
	MetricDispatcherRefusals       = "taintkit_dispatcher_refusals_total"
)

// ManagerStats is what [Metrics] reads from a manager when scraped; a
// *manager.Manager implements it.
type ManagerStats interface {
	Stats() manager.Stats
	ScheduledEvictions() int
	Failing() (n int, since time.Time)
}

// Metrics puts a taint manager's metrics on Prometheus: the manager's
// counters (read from [ManagerStats] at each scrape), and the metrics of a
// timed queue and a dispatcher through [Metrics.Queue] and
// [Metrics.Dispatcher]. It is safe for concurrent use by multiple
// goroutines. The zero value is not usable; call [NewMetrics].
type Metrics struct {
	qPending, qBackoff, qRunning        *prometheus.GaugeVec
	qAdds, qRetries, qFailures, qDrops  *prometheus.CounterVec
	qLateness, qWorkDuration            *prometheus.HistogramVec
	dDepth, dBackoff                    *prometheus.GaugeVec
	dDuration                           *prometheus.HistogramVec
	dRetries, dDrops                    *prometheus.CounterVec
	dFailures, dShutdownDrops, dRefused *prometheus.CounterVec
	leader                              prometheus.Gauge
	delay, budgetWait                   prometheus.Histogram
	stats                               atomic.Pointer[ManagerStats]
	evictionsDesc, evictionsPendingDesc *prometheus.Desc
	budgetWaitsDesc                     *prometheus.Desc
	missedDesc, failingDesc             *prometheus.Desc
	failingSinceDesc, nodeReadsDesc     *prometheus.Desc
}

var _ manager.Metrics = (*Metrics)(nil)

// NewMetrics registers the controller's metrics on reg and returns them,
// or the registration errors. Register them once per registry.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	// 1 ms to ~33 s: a handler or an API call, and how late a timer fires.
	buckets := prometheus.ExponentialBuckets(0.001, 2, 16)
	// 10 ms to ~5.8 h: deadlines are met within milliseconds, but budgets
	// and refusals may hold a pod for minutes or hours.
	longBuckets := prometheus.ExponentialBuckets(0.01, 2, 22)
	q, d := []string{"queue"}, []string{"dispatcher", "lane"}
	m := &Metrics{
		qPending:       gauge(MetricQueuePending, "Schedules waiting to start: pending or backing off.", q...),
		qBackoff:       gauge(MetricQueueBackoff, "Schedules backing off: not running, with a failed attempt (part of pending).", q...),
		qRunning:       gauge(MetricQueueRunning, "Attempts in flight.", q...),
		qAdds:          counter(MetricQueueAdds, "Schedules created.", q...),
		qRetries:       counter(MetricQueueRetries, "Failed attempts that will be retried.", q...),
		qFailures:      counter(MetricQueueFailures, "Schedules that finally failed.", q...),
		qDrops:         counter(MetricQueueDrops, "Schedules dropped at shutdown before they ran.", q...),
		qLateness:      histogram(MetricQueueLateness, "Start of a schedule's first attempt minus its fire time, in seconds.", buckets, q...),
		qWorkDuration:  histogram(MetricQueueWorkDuration, "Duration of each attempt, in seconds.", buckets, q...),
		dDepth:         gauge(MetricDispatcherDepth, "Items queued in a lane, over all shards.", d...),
		dBackoff:       gauge(MetricDispatcherBackoff, "Items waiting for a retry in a lane (not part of depth).", d...),
		dDuration:      histogram(MetricDispatcherHandleDuration, "Duration of each handler attempt, in seconds.", buckets, d...),
		dRetries:       counter(MetricDispatcherRetries, "Retries scheduled after a failed handler attempt.", d...),
		dDrops:         counter(MetricDispatcherDrops, "Items given up on, dropped at shutdown or refused.", d...),
		dFailures:      counter(MetricDispatcherFailures, "Items given up on after their last failed attempt.", d...),
		dShutdownDrops: counter(MetricDispatcherShutdownDrops, "Items dropped at shutdown, queued or waiting for a retry.", d...),
		dRefused:       counter(MetricDispatcherRefusals, "Adds refused: after the dispatcher stopped, or invalid.", d...),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLeader,
			Help: "1 while this replica's manager runs (it holds the lease, or leader election is off), else 0."}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricEvictionDelay,
			Help: "Time from each removed pod's deadline to its deletion or eviction, in seconds.", Buckets: longBuckets}),
		budgetWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricEvictionBudgetWait,
			Help: "Time evictions waited for a token of the eviction budget, in seconds.", Buckets: longBuckets}),
		budgetWaitsDesc: prometheus.NewDesc(MetricEvictionBudgetWaits,
			"Evictions that had to wait for a token of the eviction budget.", nil, nil),
		evictionsDesc: prometheus.NewDesc(MetricEvictions,
			"Evictions of the taint manager by outcome.", []string{"outcome"}, nil),
		evictionsPendingDesc: prometheus.NewDesc(MetricEvictionsPending,
			"Evictions scheduled, running or waiting for a retry.", nil, nil),
		missedDesc: prometheus.NewDesc(MetricEvictionsMissed,
			"Pods the resync found that had to go and had no eviction scheduled.", nil, nil),
		failingDesc: prometheus.NewDesc(MetricEvictionsFailing,
			"Scheduled evictions whose attempts keep failing.", nil, nil),
		failingSinceDesc: prometheus.NewDesc(MetricEvictionsFailingSince,
			"When the eviction failing longest started failing (Unix seconds); 0 if none.", nil, nil),
		nodeReadsDesc: prometheus.NewDesc(MetricNodeReads,
			"Nodes read from the API server before evicting a pod bound after its taint.", nil, nil),
	}
	var errs []error
	for _, c := range []prometheus.Collector{
		m.qPending, m.qBackoff, m.qRunning, m.qAdds, m.qRetries, m.qFailures, m.qDrops, m.qLateness, m.qWorkDuration,
		m.dDepth, m.dBackoff, m.dDuration, m.dRetries, m.dDrops, m.dFailures, m.dShutdownDrops, m.dRefused,
		m.leader, m.delay, m.budgetWait, statsCollector{m},
	} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// SetManager makes s the source of the evictions counters and the pending
// gauge. Until it is called they read zero.
func (m *Metrics) SetManager(s ManagerStats) { m.stats.Store(&s) }

// SetLeader sets the leader gauge.
func (m *Metrics) SetLeader(leading bool) {
	if leading {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// EvictionDelay observes the time from a pod's deadline to its removal:
// [MetricEvictionDelay]. It implements [manager.Metrics].
func (m *Metrics) EvictionDelay(seconds float64) { m.delay.Observe(seconds) }

// BudgetWait observes an eviction's wait for a token of the eviction
// budget: [MetricEvictionBudgetWait]. It implements [manager.Metrics].
func (m *Metrics) BudgetWait(seconds float64) { m.budgetWait.Observe(seconds) }

// Queue returns the metrics provider to give a timed queue
// (timedqueue.WithMetricsProvider); the queue's name is the queue label. It
// is also a timedqueue.BackoffMetricsProvider.
func (m *Metrics) Queue() timedqueue.MetricsProvider { return queueMetrics{m} }

// Dispatcher returns the metrics provider to give a dispatcher
// (sharding.Config.Metrics); its name and lane are the dispatcher and lane
// labels. It is also a sharding.DropCauseMetricsProvider and a
// sharding.BackoffMetricsProvider.
func (m *Metrics) Dispatcher() sharding.MetricsProvider { return dispatcherMetrics{m} }

// statsCollector reads the manager's Stats at scrape time: they are
// counters the manager keeps itself, so mirroring them into Prometheus
// counters as they change would count twice.
type statsCollector struct{ m *Metrics }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.evictionsDesc
	ch <- c.m.evictionsPendingDesc
	ch <- c.m.budgetWaitsDesc
	ch <- c.m.missedDesc
	ch <- c.m.failingDesc
	ch <- c.m.failingSinceDesc
	ch <- c.m.nodeReadsDesc
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	var st manager.Stats
	var pending, failing int
	var failingSince time.Time
	if s := c.m.stats.Load(); s != nil {
		st, pending = (*s).Stats(), (*s).ScheduledEvictions()
		failing, failingSince = (*s).Failing()
	}
	for _, o := range []struct {
		outcome string
		n       int64
	}{
		{"deleted", st.Deleted},
		{"evicted", st.EvictedByAPI},
		{"refused", st.Refused},
		{"fallback_delete", st.FallbackDeleted},
		{"dry_run", st.DryRun},
		{"gone", st.Gone},
		{"terminating", st.Terminating},
		{"rescheduled", st.Rescheduled},
		{"dropped", st.Dropped},
		{"cancelled", st.Cancelled},
		{"failed", st.Failed},
	} {
		ch <- prometheus.MustNewConstMetric(c.m.evictionsDesc, prometheus.CounterValue, float64(o.n), o.outcome)
	}
	ch <- prometheus.MustNewConstMetric(c.m.evictionsPendingDesc, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(c.m.budgetWaitsDesc, prometheus.CounterValue, float64(st.BudgetWaits))
	ch <- prometheus.MustNewConstMetric(c.m.missedDesc, prometheus.CounterValue, float64(st.ResyncFound))
	ch <- prometheus.MustNewConstMetric(c.m.failingDesc, prometheus.GaugeValue, float64(failing))
	since := 0.0
	if !failingSince.IsZero() {
		since = float64(failingSince.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.m.failingSinceDesc, prometheus.GaugeValue, since)
	ch <- prometheus.MustNewConstMetric(c.m.nodeReadsDesc, prometheus.CounterValue, float64(st.NodeReads))
}
