package noexecute

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
)

// metrics are examples/controller's taintkit_* metrics, registered once
// per Runnable: the manager's counters are read from its Stats at each
// scrape, the queue's and dispatcher's come through their providers.
type metrics struct {
	leader                      prometheus.Gauge
	delay, budgetWait           prometheus.Histogram
	qGauges                     map[string]*prometheus.GaugeVec   // pending, running
	qCounters                   map[string]*prometheus.CounterVec // adds, retries, failures, drops
	qHistograms                 map[string]*prometheus.HistogramVec
	dDepth                      *prometheus.GaugeVec
	dDuration                   *prometheus.HistogramVec
	dRetries, dDrops            *prometheus.CounterVec
	evictions, pending, waiting *prometheus.Desc
	m                           *manager.Manager
}

var _ manager.Metrics = (*metrics)(nil)

func newMetrics() *metrics {
	short := prometheus.ExponentialBuckets(0.001, 2, 16) // 1 ms to ~33 s
	long := prometheus.ExponentialBuckets(0.01, 2, 22)   // 10 ms to ~5.8 h
	hist := func(name, help string, b []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b}, labels)
	}
	x := &metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "taintkit_leader", Help: "1 while this replica's manager runs, else 0."}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "taintkit_eviction_delay_seconds",
			Help: "Time from each removed pod's deadline to its deletion or eviction, in seconds.", Buckets: long}),
		budgetWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "taintkit_eviction_budget_wait_seconds",
			Help: "Time evictions waited for a token of the eviction budget, in seconds.", Buckets: long}),
		qGauges:   map[string]*prometheus.GaugeVec{},
		qCounters: map[string]*prometheus.CounterVec{},
		qHistograms: map[string]*prometheus.HistogramVec{
			"lateness":      hist("taintkit_timedqueue_lateness_seconds", "Start of a schedule's first attempt minus its fire time, in seconds.", short, "queue"),
			"work_duration": hist("taintkit_timedqueue_work_duration_seconds", "Duration of each attempt, in seconds.", short, "queue"),
		},
		dDepth:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taintkit_dispatcher_depth", Help: "Items queued in a lane, over all shards."}, []string{"dispatcher", "lane"}),
		dDuration: hist("taintkit_dispatcher_handle_duration_seconds", "Duration of each handler attempt, in seconds.", short, "dispatcher", "lane"),
		dRetries:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taintkit_dispatcher_retries_total", Help: "Retries after a failed handler attempt."}, []string{"dispatcher", "lane"}),
		dDrops:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taintkit_dispatcher_drops_total", Help: "Items given up on."}, []string{"dispatcher", "lane"}),
		evictions: prometheus.NewDesc("taintkit_evictions_total", "Evictions of the taint manager by outcome.", []string{"outcome"}, nil),
		pending:   prometheus.NewDesc("taintkit_evictions_pending", "Evictions scheduled, running or waiting for a retry.", nil, nil),
		waiting:   prometheus.NewDesc("taintkit_eviction_budget_waits_total", "Evictions that had to wait for a token of the eviction budget.", nil, nil),
	}
	for name, help := range map[string]string{"pending": "Schedules waiting to start: pending or backing off.", "running": "Attempts in flight."} {
		x.qGauges[name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taintkit_timedqueue_" + name, Help: help}, []string{"queue"})
	}
	for name, help := range map[string]string{"adds": "Schedules created.", "retries": "Failed attempts that will be retried.",
		"failures": "Schedules that finally failed.", "drops": "Schedules dropped at shutdown before they ran."} {
		x.qCounters[name] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taintkit_timedqueue_" + name + "_total", Help: help}, []string{"queue"})
	}
	return x
}

// register registers every metric on reg, once x.m is set.
func (x *metrics) register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{x.leader, x.delay, x.budgetWait, x.dDepth, x.dDuration, x.dRetries, x.dDrops, statsCollector{x}}
	for _, v := range x.qGauges {
		cs = append(cs, v)
	}
	for _, v := range x.qCounters {
		cs = append(cs, v)
	}
	for _, v := range x.qHistograms {
		cs = append(cs, v)
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}

func (x *metrics) EvictionDelay(seconds float64) { x.delay.Observe(seconds) }
func (x *metrics) BudgetWait(seconds float64)    { x.budgetWait.Observe(seconds) }

// queueMetrics is the eviction queue's timedqueue.MetricsProvider.
type queueMetrics struct{ *metrics }

func (q queueMetrics) NewDepthMetric(n string) timedqueue.Gauge {
	return q.qGauges["pending"].WithLabelValues(n)
}
func (q queueMetrics) NewRunningMetric(n string) timedqueue.Gauge {
	return q.qGauges["running"].WithLabelValues(n)
}
func (q queueMetrics) NewAddsMetric(n string) timedqueue.Counter {
	return q.qCounters["adds"].WithLabelValues(n)
}
func (q queueMetrics) NewRetriesMetric(n string) timedqueue.Counter {
	return q.qCounters["retries"].WithLabelValues(n)
}
func (q queueMetrics) NewFailuresMetric(n string) timedqueue.Counter {
	return q.qCounters["failures"].WithLabelValues(n)
}
func (q queueMetrics) NewDropsMetric(n string) timedqueue.Counter {
	return q.qCounters["drops"].WithLabelValues(n)
}
func (q queueMetrics) NewLatenessMetric(n string) timedqueue.Histogram {
	return q.qHistograms["lateness"].WithLabelValues(n)
}
func (q queueMetrics) NewDurationMetric(n string) timedqueue.Histogram {
	return q.qHistograms["work_duration"].WithLabelValues(n)
}

// dispatcherMetrics is the update dispatcher's sharding.MetricsProvider.
type dispatcherMetrics struct{ *metrics }

func (d dispatcherMetrics) NewDepthMetric(n string, l sharding.Lane) sharding.Gauge {
	return d.dDepth.WithLabelValues(n, l.String())
}
func (d dispatcherMetrics) NewDurationMetric(n string, l sharding.Lane) sharding.Histogram {
	return d.dDuration.WithLabelValues(n, l.String())
}
func (d dispatcherMetrics) NewRetriesMetric(n string, l sharding.Lane) sharding.Counter {
	return d.dRetries.WithLabelValues(n, l.String())
}
func (d dispatcherMetrics) NewDropsMetric(n string, l sharding.Lane) sharding.Counter {
	return d.dDrops.WithLabelValues(n, l.String())
}

// statsCollector reads the manager's own counters at scrape time.
type statsCollector struct{ x *metrics }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.x.evictions
	ch <- c.x.pending
	ch <- c.x.waiting
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st, pending := c.x.m.Stats(), c.x.m.ScheduledEvictions()
	for outcome, n := range map[string]int64{"deleted": st.Deleted, "evicted": st.EvictedByAPI, "refused": st.Refused,
		"fallback_delete": st.FallbackDeleted, "dry_run": st.DryRun, "gone": st.Gone, "terminating": st.Terminating,
		"rescheduled": st.Rescheduled, "dropped": st.Dropped, "cancelled": st.Cancelled, "failed": st.Failed} {
		ch <- prometheus.MustNewConstMetric(c.x.evictions, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(c.x.pending, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(c.x.waiting, prometheus.CounterValue, float64(st.BudgetWaits))
}
