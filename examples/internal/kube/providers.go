package kube

import (
	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
)

// queueMetrics and dispatcherMetrics are two views of one Metrics: the two
// packages' providers have methods of the same names, a dispatcher's
// taking a lane besides the name.
type queueMetrics struct{ m *Metrics }

var _ timedqueue.BackoffMetricsProvider = queueMetrics{}

func (q queueMetrics) NewDepthMetric(name string) timedqueue.Gauge {
	return q.m.qPending.WithLabelValues(name)
}
func (q queueMetrics) NewBackoffMetric(name string) timedqueue.Gauge {
	return q.m.qBackoff.WithLabelValues(name)
}
func (q queueMetrics) NewRunningMetric(name string) timedqueue.Gauge {
	return q.m.qRunning.WithLabelValues(name)
}
func (q queueMetrics) NewAddsMetric(name string) timedqueue.Counter {
	return q.m.qAdds.WithLabelValues(name)
}
func (q queueMetrics) NewRetriesMetric(name string) timedqueue.Counter {
	return q.m.qRetries.WithLabelValues(name)
}
func (q queueMetrics) NewFailuresMetric(name string) timedqueue.Counter {
	return q.m.qFailures.WithLabelValues(name)
}
func (q queueMetrics) NewDropsMetric(name string) timedqueue.Counter {
	return q.m.qDrops.WithLabelValues(name)
}
func (q queueMetrics) NewLatenessMetric(name string) timedqueue.Histogram {
	return q.m.qLateness.WithLabelValues(name)
}
func (q queueMetrics) NewDurationMetric(name string) timedqueue.Histogram {
	return q.m.qWorkDuration.WithLabelValues(name)
}

type dispatcherMetrics struct{ m *Metrics }

var (
	_ sharding.DropCauseMetricsProvider = dispatcherMetrics{}
	_ sharding.BackoffMetricsProvider   = dispatcherMetrics{}
)

func (d dispatcherMetrics) NewDepthMetric(name string, lane sharding.Lane) sharding.Gauge {
	return d.m.dDepth.WithLabelValues(name, lane.String())
}
func (d dispatcherMetrics) NewBackoffMetric(name string, lane sharding.Lane) sharding.Gauge {
	return d.m.dBackoff.WithLabelValues(name, lane.String())
}
func (d dispatcherMetrics) NewDurationMetric(name string, lane sharding.Lane) sharding.Histogram {
	return d.m.dDuration.WithLabelValues(name, lane.String())
}
func (d dispatcherMetrics) NewRetriesMetric(name string, lane sharding.Lane) sharding.Counter {
	return d.m.dRetries.WithLabelValues(name, lane.String())
}
func (d dispatcherMetrics) NewDropsMetric(name string, lane sharding.Lane) sharding.Counter {
	return d.m.dDrops.WithLabelValues(name, lane.String())
}
func (d dispatcherMetrics) NewFailuresMetric(name string, lane sharding.Lane) sharding.Counter {
	return d.m.dFailures.WithLabelValues(name, lane.String())
}
func (d dispatcherMetrics) NewShutdownDropsMetric(name string, lane sharding.Lane) sharding.Counter {
	return d.m.dShutdownDrops.WithLabelValues(name, lane.String())
}
func (d dispatcherMetrics) NewRefusalsMetric(name string, lane sharding.Lane) sharding.Counter {
	return d.m.dRefused.WithLabelValues(name, lane.String())
}
