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
// Metrics must be safe for concurrent use and not block. A depth gauge may be
// off by one while items move; it is exact whenever the dispatcher is quiet.
type MetricsProvider interface {
	NewDepthMetric(name string, lane Lane) Gauge        // items queued: the lane's share of Len
	NewDurationMetric(name string, lane Lane) Histogram // attempt durations, in seconds on the clock
	NewRetriesMetric(name string, lane Lane) Counter    // retries scheduled
	NewDropsMetric(name string, lane Lane) Counter      // items given up on or refused
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
	// timed reports whether a duration histogram was given, so the handler
	// is timed only when someone looks.
	timed bool
}

func newLaneMetrics(p MetricsProvider, name string, lane Lane) laneMetrics {
	m := laneMetrics{depth: noopMetric{}, duration: noopMetric{}, retries: noopMetric{}, drops: noopMetric{}}
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
	return m
}
