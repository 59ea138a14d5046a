package timedqueue

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

// MetricsProvider creates a queue's metrics in [New], each for the queue's
// name ([WithName]). A method may return nil, which records nothing. Metrics
// must be safe for concurrent use and not block. A provider may also
// implement [BackoffMetricsProvider]; the taintkit package documentation
// compares each metric with sharding's.
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

// BackoffMetricsProvider is a [MetricsProvider] that also gauges the
// schedules backing off: not running, with a failed attempt, waiting for
// their NextAttempt. They are part of depth: depth minus backoff is what
// sharding's depth gauge counts, and backoff means what sharding's does.
// [New] calls it if the provider implements this interface.
type BackoffMetricsProvider interface {
	MetricsProvider
	// NewBackoffMetric gauges the schedules backing off.
	NewBackoffMetric(name string) Gauge
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
		pending:      p.NewDepthMetric(name),
		running:      p.NewRunningMetric(name),
		adds:         p.NewAddsMetric(name),
		retries:      p.NewRetriesMetric(name),
		failures:     p.NewFailuresMetric(name),
		drops:        p.NewDropsMetric(name),
		lateness:     p.NewLatenessMetric(name),
		workDuration: p.NewDurationMetric(name),
	}
	if bp, ok := p.(BackoffMetricsProvider); ok {
		m.backoff = bp.NewBackoffMetric(name)
	}
	for _, g := range []*Gauge{&m.pending, &m.running, &m.backoff} {
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
	pending, running, backoff      int
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
	for ; d.backoff > 0; d.backoff-- {
		m.backoff.Inc()
	}
	for ; d.backoff < 0; d.backoff++ {
		m.backoff.Dec()
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
