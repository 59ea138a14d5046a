package workqueue_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	clientworkqueue "k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

// recorder is a MetricsProvider that keeps every value its metrics see.
type recorder struct {
	mu     sync.Mutex
	name   string
	counts map[string]int       // depth, adds, retries
	obs    map[string][]float64 // latency, work
	gauges map[string]float64   // unfinished, longest
}

func newRecorder() *recorder {
	return &recorder{counts: map[string]int{}, obs: map[string][]float64{}, gauges: map[string]float64{}}
}

type metric struct {
	r    *recorder
	name string
}

func (m metric) Inc() { m.add(1) }
func (m metric) Dec() { m.add(-1) }
func (m metric) add(n int) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.r.counts[m.name] += n
}
func (m metric) Observe(v float64) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.r.obs[m.name] = append(m.r.obs[m.name], v)
}
func (m metric) Set(v float64) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.r.gauges[m.name] = v
}

func (r *recorder) metric(queue, name string) metric {
	r.name = queue
	return metric{r, name}
}
func (r *recorder) NewDepthMetric(n string) clientworkqueue.GaugeMetric {
	return r.metric(n, "depth")
}
func (r *recorder) NewAddsMetric(n string) clientworkqueue.CounterMetric {
	return r.metric(n, "adds")
}
func (r *recorder) NewLatencyMetric(n string) clientworkqueue.HistogramMetric {
	return r.metric(n, "latency")
}
func (r *recorder) NewWorkDurationMetric(n string) clientworkqueue.HistogramMetric {
	return r.metric(n, "work")
}
func (r *recorder) NewUnfinishedWorkSecondsMetric(n string) clientworkqueue.SettableGaugeMetric {
	return r.metric(n, "unfinished")
}
func (r *recorder) NewLongestRunningProcessorSecondsMetric(n string) clientworkqueue.SettableGaugeMetric {
	return r.metric(n, "longest")
}
func (r *recorder) NewRetriesMetric(n string) clientworkqueue.CounterMetric {
	return r.metric(n, "retries")
}

func (r *recorder) snapshot() (map[string]int, map[string][]float64, map[string]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts, obs, gauges := map[string]int{}, map[string][]float64{}, map[string]float64{}
	for k, v := range r.counts {
		counts[k] = v
	}
	for k, v := range r.obs {
		obs[k] = append([]float64(nil), v...)
	}
	for k, v := range r.gauges {
		gauges[k] = v
	}
	return counts, obs, gauges
}

func TestMetrics(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := testingclock.NewFakeClock(t0)
				r := newRecorder()
				q := c.new(workqueue.Config[string]{Name: "q", MetricsProvider: r, Clock: clk})
				defer q.ShutDown()
				assert.Equal(t, "q", r.name)

				q.Add("a")
				q.Add("a") // no change
				q.AddAfter("b", time.Second)
				q.AddAfter("c", time.Hour)
				q.Schedule("c", t0.Add(2*time.Hour))
				counts, _, _ := r.snapshot()
				assert.Equal(t, map[string]int{"depth": 1, "adds": 1, "retries": 3}, counts)

				clk.Step(time.Second) // b ready
				synctest.Wait()
				clk.Step(2 * time.Second)
				get(t, q) // a: 3 s in the queue
				get(t, q) // b: 2 s
				clk.Step(300 * time.Millisecond)
				synctest.Wait()
				_, _, gauges := r.snapshot()
				assert.Empty(t, gauges, "not before 500 ms")
				clk.Step(200 * time.Millisecond)
				synctest.Wait()
				_, _, gauges = r.snapshot()
				assert.Equal(t, map[string]float64{"unfinished": 1, "longest": 0.5}, gauges)
				q.Done("a")
				clk.Step(500 * time.Millisecond)
				synctest.Wait()
				_, _, gauges = r.snapshot()
				assert.Equal(t, map[string]float64{"unfinished": 1, "longest": 1}, gauges)
				q.Done("b")

				assert.True(t, q.Cancel("c"))
				counts, obs, gauges := r.snapshot()
				assert.Equal(t, map[string]int{"depth": 0, "adds": 2, "retries": 3}, counts)
				assert.Equal(t, []float64{3, 2}, obs["latency"])
				assert.Equal(t, []float64{0.5, 1}, obs["work"])
				assert.Equal(t, map[string]float64{"unfinished": 0, "longest": 0}, gauges, "nothing processed")

				q.Add("d")
				q.Cancel("d")
				q.Add("e")
				q.Schedule("e", t0.Add(3*time.Hour))
				counts, _, _ = r.snapshot()
				assert.Equal(t, 0, counts["depth"], "taken back and put off: out of the depth")
			})
		})
	}
}

func TestNoMetricsWithoutAName(t *testing.T) {
	r := newRecorder()
	q := workqueue.NewRateLimiting(workqueue.Config[string]{MetricsProvider: r})
	defer q.ShutDown()
	q.Add("a")
	counts, _, _ := r.snapshot()
	assert.Empty(t, counts)
}
