package sharding

import "strconv"

// Lane names one of a dispatcher's two priority lanes.
type Lane uint8

const (
	// LaneHigh is the lane of items added with AddHigh (node updates, in the
	// taint manager). A worker takes a queued high item before any low one.
	LaneHigh Lane = iota
	// LaneLow is the lane of items added with AddLow (pod updates).
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

// Counter is a monotonically increasing metric. A prometheus.Counter
// satisfies it.
type Counter interface {
	Inc()
}

// Gauge is a metric that goes up and down. A prometheus.Gauge satisfies it.
type Gauge interface {
	Inc()
	Dec()
}

// Histogram records observations, in seconds for durations. A
// prometheus.Histogram satisfies it.
type Histogram interface {
	Observe(float64)
}

// MetricsProvider creates the metrics of one [Dispatcher], once per lane, when
// [New] runs. A method may return nil for a metric it does not want.
//
// The dispatcher calls the metrics without holding any of its locks, from
// the goroutines calling AddHigh/AddLow, from its workers and from Run, so
// the metrics must be safe for concurrent use. Because calls are not
// serialised, a depth gauge may briefly read one below or above the true
// depth (a worker's Dec can overtake the Inc of the Add that queued the item);
// it is exact whenever the dispatcher is quiet.
type MetricsProvider interface {
	// NewDepthMetric returns the gauge of items queued in lane, over all
	// shards: the lane's share of [Dispatcher.Len].
	NewDepthMetric(lane Lane) Gauge
	// NewLatencyMetric returns the histogram of how long the lane's
	// handler took per attempt, in seconds on the dispatcher's clock.
	NewLatencyMetric(lane Lane) Histogram
	// NewRetriesMetric returns the counter of retries scheduled after a
	// failed attempt in lane.
	NewRetriesMetric(lane Lane) Counter
	// NewDropsMetric returns the counter of lane items given up on: after
	// the last attempt, at shutdown, after Run returned, because the key
	// func panicked, or because the item was invalid (ErrInvalidItem).
	NewDropsMetric(lane Lane) Counter
}

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Observe(float64) {}

// laneMetrics holds the resolved metrics of one lane; none is nil.
type laneMetrics struct {
	depth   Gauge
	latency Histogram
	retries Counter
	drops   Counter
	// timed reports whether a latency histogram was given, so the handler
	// is timed only when someone looks.
	timed bool
}

func newLaneMetrics(p MetricsProvider, lane Lane) laneMetrics {
	m := laneMetrics{depth: noopMetric{}, latency: noopMetric{}, retries: noopMetric{}, drops: noopMetric{}}
	if p == nil {
		return m
	}
	if g := p.NewDepthMetric(lane); g != nil {
		m.depth = g
	}
	if h := p.NewLatencyMetric(lane); h != nil {
		m.latency, m.timed = h, true
	}
	if c := p.NewRetriesMetric(lane); c != nil {
		m.retries = c
	}
	if c := p.NewDropsMetric(lane); c != nil {
		m.drops = c
	}
	return m
}
