package timedqueue

// Counter is a monotonically increasing metric, such as a Prometheus counter.
// Implementations must be safe for concurrent use and must not block or panic.
type Counter interface {
	Inc()
}

// Gauge is a metric that goes up and down, such as a Prometheus gauge.
// Implementations must be safe for concurrent use and must not block or panic.
type Gauge interface {
	Inc()
	Dec()
}

// Histogram records observations, such as a Prometheus histogram.
// Implementations must be safe for concurrent use and must not block or panic.
type Histogram interface {
	Observe(float64)
}

// MetricsProvider makes the metrics of one queue, in the spirit of client-go's
// workqueue.MetricsProvider but without any Prometheus dependency. Each method is
// called once, by [New], with the name given by [WithName] (empty by default).
// Durations are observed in seconds. Metrics are updated without the queue's
// lock held, so a gauge may lag the queue by a few updates but never drifts.
// A method may return nil for a metric it does not want.
type MetricsProvider interface {
	// NewPendingMetric counts schedules waiting to start: pending and backing
	// off (not running, not withdrawn).
	NewPendingMetric(name string) Gauge
	// NewRunningMetric counts attempts in flight, withdrawn ones included:
	// the concurrency slots in use.
	NewRunningMetric(name string) Gauge
	// NewAddsMetric counts schedules created by AddWork and UpdateWork.
	NewAddsMetric(name string) Counter
	// NewRetriesMetric counts failed attempts that will be retried.
	NewRetriesMetric(name string) Counter
	// NewFailuresMetric counts schedules that finally failed: the last attempt
	// failed, or an attempt returned a Permanent error, or an attempt failed
	// after Shutdown.
	NewFailuresMetric(name string) Counter
	// NewDropsMetric counts schedules dropped by Shutdown before they could run.
	NewDropsMetric(name string) Counter
	// NewLatenessMetric observes, for the first attempt of each schedule, its
	// start time minus its FireAt, in seconds.
	NewLatenessMetric(name string) Histogram
	// NewWorkDurationMetric observes how long each attempt ran, in seconds.
	NewWorkDurationMetric(name string) Histogram
}

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Observe(float64) {}

type noopProvider struct{}

func (noopProvider) NewPendingMetric(string) Gauge          { return noopMetric{} }
func (noopProvider) NewRunningMetric(string) Gauge          { return noopMetric{} }
func (noopProvider) NewAddsMetric(string) Counter           { return noopMetric{} }
func (noopProvider) NewRetriesMetric(string) Counter        { return noopMetric{} }
func (noopProvider) NewFailuresMetric(string) Counter       { return noopMetric{} }
func (noopProvider) NewDropsMetric(string) Counter          { return noopMetric{} }
func (noopProvider) NewLatenessMetric(string) Histogram     { return noopMetric{} }
func (noopProvider) NewWorkDurationMetric(string) Histogram { return noopMetric{} }

// metrics holds one queue's metrics; nil results from a provider become no-ops.
type metrics struct {
	pending, running               Gauge
	adds, retries, failures, drops Counter
	lateness, workDuration         Histogram
	timeWork                       bool // workDuration is not a no-op: read the clock around work
}

func newMetrics(p MetricsProvider, name string) metrics {
	m := metrics{
		pending:      p.NewPendingMetric(name),
		running:      p.NewRunningMetric(name),
		adds:         p.NewAddsMetric(name),
		retries:      p.NewRetriesMetric(name),
		failures:     p.NewFailuresMetric(name),
		drops:        p.NewDropsMetric(name),
		lateness:     p.NewLatenessMetric(name),
		workDuration: p.NewWorkDurationMetric(name),
	}
	for _, g := range []*Gauge{&m.pending, &m.running} {
		if *g == nil {
			*g = noopMetric{}
		}
	}
	for _, c := range []*Counter{&m.adds, &m.retries, &m.failures, &m.drops} {
		if *c == nil {
			*c = noopMetric{}
		}
	}
	for _, h := range []*Histogram{&m.lateness, &m.workDuration} {
		if *h == nil {
			*h = noopMetric{}
		}
	}
	_, noop := m.workDuration.(noopMetric)
	m.timeWork = !noop
	return m
}

// delta is a batch of metric updates computed under the lock and applied after
// it is released, so metric implementations never run under the queue's lock.
type delta struct {
	pending, running               int
	adds, retries, failures, drops int
}

func (m *metrics) apply(d delta) {
	for ; d.pending > 0; d.pending-- {
		m.pending.Inc()
	}
	for ; d.pending < 0; d.pending++ {
		m.pending.Dec()
	}
	for ; d.running > 0; d.running-- {
		m.running.Inc()
	}
	for ; d.running < 0; d.running++ {
		m.running.Dec()
	}
	for ; d.adds > 0; d.adds-- {
		m.adds.Inc()
	}
	for ; d.retries > 0; d.retries-- {
		m.retries.Inc()
	}
	for ; d.failures > 0; d.failures-- {
		m.failures.Inc()
	}
	for ; d.drops > 0; d.drops-- {
		m.drops.Inc()
	}
}
