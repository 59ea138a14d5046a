package timedqueue

// Counter is a metric that only goes up; a prometheus.Counter satisfies it.
type Counter interface{ Inc() }

// Gauge is a metric that goes up and down; a prometheus.Gauge satisfies it.
type Gauge interface {
	Inc()
	Dec()
}

// Histogram records observations; a prometheus.Histogram satisfies it.
type Histogram interface{ Observe(float64) }

// MetricsProvider creates a queue's metrics in [New], each for the queue's
// name ([WithName]). A method may return nil, which records nothing. Metrics
// must be safe for concurrent use and not block; the taintkit package
// documentation compares each with sharding's.
type MetricsProvider interface {
	NewDepthMetric(name string) Gauge        // pending and backing-off schedules
	NewRunningMetric(name string) Gauge      // attempts in flight, withdrawn ones included
	NewAddsMetric(name string) Counter       // schedules made
	NewRetriesMetric(name string) Counter    // retries scheduled
	NewFailuresMetric(name string) Counter   // schedules that finally failed (see FailureFunc)
	NewDropsMetric(name string) Counter      // schedules dropped by Shutdown
	NewLatenessMetric(name string) Histogram // start − FireAt of first attempts, in seconds
	NewDurationMetric(name string) Histogram // attempt durations, in seconds on the clock
}

// BackoffMetricsProvider is a [MetricsProvider] that also gauges, if [New]
// is given one, the schedules backing off: waiting for their NextAttempt after
// a failed attempt. They are part of depth; depth minus backoff is what
// sharding's depth gauge counts, and backoff means what sharding's does.
type BackoffMetricsProvider interface {
	MetricsProvider
	NewBackoffMetric(name string) Gauge // schedules backing off
}

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Observe(float64) {}

type noopProvider struct{}

func (noopProvider) NewDepthMetric(string) Gauge        { return noopMetric{} }
func (noopProvider) NewRunningMetric(string) Gauge      { return noopMetric{} }
func (noopProvider) NewAddsMetric(string) Counter       { return noopMetric{} }
func (noopProvider) NewRetriesMetric(string) Counter    { return noopMetric{} }
func (noopProvider) NewFailuresMetric(string) Counter   { return noopMetric{} }
func (noopProvider) NewDropsMetric(string) Counter      { return noopMetric{} }
func (noopProvider) NewLatenessMetric(string) Histogram { return noopMetric{} }
func (noopProvider) NewDurationMetric(string) Histogram { return noopMetric{} }

// metrics holds one queue's metrics; nil results from a provider become no-ops.
type metrics struct {
	pending, running               Gauge
	backoff                        Gauge // a no-op unless the provider is a BackoffMetricsProvider
	adds, retries, failures, drops Counter
	lateness, workDuration         Histogram
	timeWork                       bool // workDuration is not a no-op: read the clock around work
}

func newMetrics(p MetricsProvider, name string) metrics {
	m := metrics{
		pending:      orNoop[Gauge](p.NewDepthMetric(name)),
		running:      orNoop[Gauge](p.NewRunningMetric(name)),
		backoff:      noopMetric{},
		adds:         orNoop[Counter](p.NewAddsMetric(name)),
		retries:      orNoop[Counter](p.NewRetriesMetric(name)),
		failures:     orNoop[Counter](p.NewFailuresMetric(name)),
		drops:        orNoop[Counter](p.NewDropsMetric(name)),
		lateness:     orNoop[Histogram](p.NewLatenessMetric(name)),
		workDuration: orNoop[Histogram](p.NewDurationMetric(name)),
	}
	if bp, ok := p.(BackoffMetricsProvider); ok {
		m.backoff = orNoop[Gauge](bp.NewBackoffMetric(name))
	}
	_, noop := m.workDuration.(noopMetric)
	m.timeWork = !noop
	return m
}

// orNoop returns metric, or a no-op if it is nil.
func orNoop[M any](metric M) M {
	if any(metric) == nil {
		return any(noopMetric{}).(M)
	}
	return metric
}

// delta is a batch of metric updates computed under the lock and applied after
// it is released, so metric implementations never run under the queue's lock.
type delta struct {
	pending, running, backoff      int
	adds, retries, failures, drops int
}

func (m *metrics) apply(d delta) {
	move(m.pending, d.pending)
	move(m.running, d.running)
	move(m.backoff, d.backoff)
	count(m.adds, d.adds)
	count(m.retries, d.retries)
	count(m.failures, d.failures)
	count(m.drops, d.drops)
}

func count(c Counter, n int) {
	for ; n > 0; n-- {
		c.Inc()
	}
}

// move moves g by n: n calls of Inc, or -n of Dec.
func move(g Gauge, n int) {
	for ; n > 0; n-- {
		g.Inc()
	}
	for ; n < 0; n++ {
		g.Dec()
	}
}
