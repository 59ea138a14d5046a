package workqueue

import (
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/taintkit/taintkit/internal/sched"
)

// unfinishedPeriod is how often the unfinished-work metrics are updated
// while items are processed, as client-go's queue does.
const unfinishedPeriod = 500 * time.Millisecond

// metrics are a queue's metrics, in client-go's shape: depth counts the
// ready items (those processed included), adds the items made ready,
// latency the seconds from ready to handed out, workDuration from handed
// out to Done, retries the adds that wait (After, RateLimited, or Schedule
// to a later time); unfinished and longest are the seconds of work in
// progress, in all and the longest, updated every unfinishedPeriod.
type metrics[T comparable] struct {
	on           bool
	depth        workqueue.GaugeMetric
	adds         workqueue.CounterMetric
	latency      workqueue.HistogramMetric
	workDuration workqueue.HistogramMetric
	unfinished   workqueue.SettableGaugeMetric
	longest      workqueue.SettableGaugeMetric
	retries      workqueue.CounterMetric

	// Guarded by the queue's mutex.
	started map[T]sched.Moment // the items processed: when handed out
	next    sched.Moment       // the next update of unfinished and longest, or Never
}

func newMetrics[T comparable](p workqueue.MetricsProvider, name string) metrics[T] {
	if p == nil || name == "" {
		return metrics[T]{next: sched.Never}
	}
	return metrics[T]{
		on:           true,
		depth:        p.NewDepthMetric(name),
		adds:         p.NewAddsMetric(name),
		latency:      p.NewLatencyMetric(name),
		workDuration: p.NewWorkDurationMetric(name),
		unfinished:   p.NewUnfinishedWorkSecondsMetric(name),
		longest:      p.NewLongestRunningProcessorSecondsMetric(name),
		retries:      p.NewRetriesMetric(name),
		started:      make(map[T]sched.Moment),
		next:         sched.Never,
	}
}

// delta is what one call changed, applied to the metrics once the queue's
// lock is released: metric implementations never run under it.
type delta struct {
	depth, adds, retries int
	latency, work        float64
	observed             uint8 // latency (1), work (2), unfinished and longest (4)
	unfinished, longest  float64
}

func (d *delta) readied() { d.adds++; d.depth++ }

// handedOut records that the item of e was handed out at now.
func (m *metrics[T]) handedOut(d *delta, e *entry[T], now sched.Moment) {
	d.depth--
	if !m.on {
		return
	}
	d.latency, d.observed = now.SecondsSince(e.at), d.observed|1
	if len(m.started) == 0 {
		m.next = now.Add(unfinishedPeriod)
	}
	m.started[e.key] = now
}

// done records that item was Done at now.
func (m *metrics[T]) done(d *delta, item T, now sched.Moment) {
	if !m.on {
		return
	}
	if at, ok := m.started[item]; ok {
		d.work, d.observed = now.SecondsSince(at), d.observed|2
		delete(m.started, item)
	}
	if len(m.started) == 0 {
		d.unfinished, d.longest, d.observed = 0, 0, d.observed|4
		m.next = sched.Never
	}
}

// updateUnfinished updates unfinished and longest if it is time, and
// returns when they are next updated.
func (m *metrics[T]) updateUnfinished(now sched.Moment, d *delta) sched.Moment {
	if len(m.started) == 0 || now.Before(m.next) {
		return m.next
	}
	d.unfinished, d.longest, d.observed = 0, 0, d.observed|4
	for _, at := range m.started {
		age := now.SecondsSince(at)
		d.unfinished += age
		d.longest = max(d.longest, age)
	}
	m.next = now.Add(unfinishedPeriod)
	return m.next
}

func (m *metrics[T]) apply(d *delta) {
	if !m.on {
		return
	}
	for ; d.depth > 0; d.depth-- {
		m.depth.Inc()
	}
	for ; d.depth < 0; d.depth++ {
		m.depth.Dec()
	}
	for range d.adds {
		m.adds.Inc()
	}
	for range d.retries {
		m.retries.Inc()
	}
	if d.observed&1 != 0 {
		m.latency.Observe(d.latency)
	}
	if d.observed&2 != 0 {
		m.workDuration.Observe(d.work)
	}
	if d.observed&4 != 0 {
		m.unfinished.Set(d.unfinished)
		m.longest.Set(d.longest)
	}
}
