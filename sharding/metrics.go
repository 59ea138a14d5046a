package sharding

import "strconv"

// Lane names one of a dispatcher's two priority lanes.
type Lane uint8

// The lanes: LaneHigh holds the items added with AddHigh (in the taint
// manager, node updates), LaneLow those added with AddLow (pod updates).
const (
	LaneHigh Lane = iota
	LaneLow
)

// String returns "high" or "low".
func (l Lane) String() string {
	switch l {
	case LaneHigh:
		return "high"
	case LaneLow:
		return "low"
	}
	return "Lane(" + strconv.Itoa(int(l)) + ")"
}

// Counter is a metric that only goes up; a prometheus.Counter satisfies it.
type Counter interface {
	Inc()
}

// Gauge is a metric that goes up and down; a prometheus.Gauge satisfies it.
type Gauge interface {
	Inc()
	Dec()
}

// Histogram records observations; a prometheus.Histogram satisfies it.
type Histogram interface {
	Observe(float64)
}

// MetricsProvider creates a dispatcher's metrics in [New], each for its name
// (Config.Name) and a lane. A method may return nil, which records nothing.
// Metrics must be safe for concurrent use and not block. A gauge may be off
// by one while items move; it is exact whenever the dispatcher is quiet. A
// provider may also implement [DropCauseMetricsProvider] and
// [BackoffMetricsProvider]; the taintkit package documentation compares each
// metric with timedqueue's.
type MetricsProvider interface {
	NewDepthMetric(name string, lane Lane) Gauge        // items queued: the lane's share of Len
	NewDurationMetric(name string, lane Lane) Histogram // attempt durations, in seconds on the clock
	NewRetriesMetric(name string, lane Lane) Counter    // retries scheduled
	NewDropsMetric(name string, lane Lane) Counter      // items given up on or refused
}

// DropCauseMetricsProvider is a [MetricsProvider] that also counts the
// causes of drops apart: every item the drops metric counts is counted by
// exactly one of these. [New] calls them if Config.Metrics implements this
// interface.
type DropCauseMetricsProvider interface {
	MetricsProvider
	// NewFailuresMetric counts the items given up on after their last
	// failed attempt: the Config.OnDrop calls whose Err is not
	// ErrStopped. It means what timedqueue's failures metric means.
	NewFailuresMetric(name string, lane Lane) Counter
	// NewShutdownDropsMetric counts the items Run dropped at shutdown,
	// queued or waiting for a retry: the Config.OnDrop calls with
	// ErrStopped. It means what timedqueue's drops metric means.
	NewShutdownDropsMetric(name string, lane Lane) Counter
	// NewRefusalsMetric counts the adds refused (see
	// [Dispatcher.AddHigh]), which never reach Config.OnDrop.
	NewRefusalsMetric(name string, lane Lane) Counter
}

// BackoffMetricsProvider is a [MetricsProvider] that also gauges the items
// waiting for a retry, which the depth gauge does not count: depth plus
// backoff is what timedqueue's depth gauge counts. [New] calls it if
// Config.Metrics implements this interface.
type BackoffMetricsProvider interface {
	MetricsProvider
	// NewBackoffMetric gauges the lane's items waiting for a retry.
	NewBackoffMetric(name string, lane Lane) Gauge
}

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Observe(float64) {}

// laneMetrics holds the resolved metrics of one lane; none is nil.
type laneMetrics struct {
	depth    Gauge
	duration Histogram
	retries  Counter
	drops    Counter
	// The causes of drops, and the items waiting for a retry: no-ops
	// unless the provider implements the optional interfaces.
	failures, shutdownDrops, refusals Counter
	backoff                           Gauge
	// timed reports whether a duration histogram was given, so the handler
	// is timed only when someone looks.
	timed bool
}

func newLaneMetrics(p MetricsProvider, name string, lane Lane) laneMetrics {
	m := laneMetrics{depth: noopMetric{}, duration: noopMetric{}, retries: noopMetric{}, drops: noopMetric{},
		failures: noopMetric{}, shutdownDrops: noopMetric{}, refusals: noopMetric{}, backoff: noopMetric{}}
	if p == nil {
		return m
	}
	if g := p.NewDepthMetric(name, lane); g != nil {
		m.depth = g
	}
	if h := p.NewDurationMetric(name, lane); h != nil {
		m.duration, m.timed = h, true
	}
	if c := p.NewRetriesMetric(name, lane); c != nil {
		m.retries = c
	}
	if c := p.NewDropsMetric(name, lane); c != nil {
		m.drops = c
	}
	if dp, ok := p.(DropCauseMetricsProvider); ok {
		for _, c := range []struct {
			to *Counter
			c  Counter
		}{
			{&m.failures, dp.NewFailuresMetric(name, lane)},
			{&m.shutdownDrops, dp.NewShutdownDropsMetric(name, lane)},
			{&m.refusals, dp.NewRefusalsMetric(name, lane)},
		} {
			if c.c != nil {
				*c.to = c.c
			}
		}
	}
	if bp, ok := p.(BackoffMetricsProvider); ok {
		if g := bp.NewBackoffMetric(name, lane); g != nil {
			m.backoff = g
		}
	}
	return m
}

// failed counts an item given up on after its last attempt.
func (m *laneMetrics) failed() {
	m.drops.Inc()
	m.failures.Inc()
}

// stopped counts an item dropped at shutdown.
func (m *laneMetrics) stopped() {
	m.drops.Inc()
	m.shutdownDrops.Inc()
}

// refused counts an add refused.
func (m *laneMetrics) refused() {
	m.drops.Inc()
	m.refusals.Inc()
}
