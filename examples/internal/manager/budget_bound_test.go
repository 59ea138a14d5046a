package manager_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
)

// startLog is a PodClient that records when each delete starts, on the fake
// clock, and can hold the first calls for a while.
type startLog struct {
	*cluster.Cluster
	e *env

	mu     sync.Mutex
	starts []time.Time
	block  int           // the first block calls wait for hold
	hold   time.Duration // on the fake clock
}

func (s *startLog) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	s.mu.Lock()
	s.starts = append(s.starts, s.e.clk.Now())
	wait := len(s.starts) <= s.block
	s.mu.Unlock()
	if wait {
		<-s.e.clk.After(s.hold)
	}
	return s.Cluster.DeletePod(ctx, namespace, name, opts)
}

func (s *startLog) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]time.Time(nil), s.starts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// requireWithinBudget fails if any window of starts holds more than
// burst + rate × its length.
func requireWithinBudget(t *testing.T, starts []time.Time, rate float64, burst int, from time.Time) {
	t.Helper()
	for i := range starts {
		for j := i; j < len(starts); j++ {
			length := starts[j].Sub(starts[i]).Seconds()
			n := j - i + 1
			require.LessOrEqual(t, float64(n), float64(burst)+rate*length+1e-9,
				"%d evictions started in the %.3f s from +%v to +%v (budget %g/s, burst %d); all starts: %v",
				n, length, starts[i].Sub(from), starts[j].Sub(from), rate, burst, offsets(starts, from))
		}
	}
}

func offsets(ts []time.Time, from time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = fmt.Sprint(t.Sub(from))
	}
	return out
}

// Issue 17, defect 1: a token reserved for an eviction that could not start
// on time (every eviction slot held by a slow delete) was honoured however
// late, on top of the tokens the bucket had refilled meanwhile: six deletes
// started at once at 1/s with a burst of 1.
func TestBudgetBoundHoldsWhenDeletesAreSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var client *startLog
		e := newEnv(t, func(c *manager.Config) {
			c.EvictionRate, c.EvictionBurst, c.MaxConcurrentEvictions = 1, 1, 2
			client = &startLog{Cluster: c.Client.(*cluster.Cluster), block: 2, hold: 10 * time.Second}
			c.Client = client
			c.Recorder = nil
		})
		client.e = e
		e.addNode("n1")
		for i := range 8 {
			e.addPod(fmt.Sprintf("p%d", i), "n1", nil)
		}
		start := e.clk.Now()
		e.taint("n1")
		for range 300 {
			e.step(100 * time.Millisecond)
		}
		starts := client.times()
		require.Len(t, starts, 8, "every pod evicted: %v", offsets(starts, start))
		requireWithinBudget(t, starts, 1, 1, start)
		for i := 1; i < 8; i++ {
			assert.False(t, e.exists(fmt.Sprintf("p%d", i)))
		}
	})
}

// gexitOnce is a queue MetricsProvider whose lateness histogram calls
// runtime.Goexit the first time it observes: an attempt that ends before its
// work func runs.
type goexitOnce struct{ done atomic.Bool }

func (g *goexitOnce) Observe(float64) {
	if g.done.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
}

type goexitProvider struct{ h *goexitOnce }

func (goexitProvider) NewDepthMetric(string) timedqueue.Gauge          { return nil }
func (goexitProvider) NewRunningMetric(string) timedqueue.Gauge        { return nil }
func (goexitProvider) NewAddsMetric(string) timedqueue.Counter         { return nil }
func (goexitProvider) NewRetriesMetric(string) timedqueue.Counter      { return nil }
func (goexitProvider) NewFailuresMetric(string) timedqueue.Counter     { return nil }
func (goexitProvider) NewDropsMetric(string) timedqueue.Counter        { return nil }
func (p goexitProvider) NewLatenessMetric(string) timedqueue.Histogram { return p.h }
func (goexitProvider) NewDurationMetric(string) timedqueue.Histogram {
	return nil
}

// Issue 17, defect 4: an attempt that ended without reaching the eviction
// code (here: a metric calling runtime.Goexit before the work func) left its
// number unpassed, and every later eviction waited for it for ever; Run and
// Shutdown never returned.
func TestBudgetSurvivesAnAttemptThatNeverRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) {
			c.EvictionRate, c.EvictionBurst = 10, 1
			c.QueueMetrics = goexitProvider{h: &goexitOnce{}}
			c.Logger, c.Recorder = ptr.To(logr.Discard()), nil
		})
		e.addNode("n1")
		for i := range 5 {
			e.addPod(fmt.Sprintf("p%d", i), "n1", nil)
		}
		e.taint("n1")
		for range 100 {
			e.step(100 * time.Millisecond)
		}
		for i := range 5 {
			assert.False(t, e.exists(fmt.Sprintf("p%d", i)), "p%d evicted", i)
		}
		// newEnv's cleanup stops the manager: Run must return.
	})
}

// An eviction decided late whose deadline is earlier than those waiting for a
// token takes the next token: the line is in deadline order, not arrival order.
func TestBudgetLateEarlierDeadlineGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) {
			c.EvictionRate, c.EvictionBurst = 1, 1
			c.Logger, c.Recorder = ptr.To(logr.Discard()), nil
		})
		e.addNode("n1")
		e.addNode("n2")
		del := recordDeletions(e)
		podsBoundOneByOne(e, "default", "n2", 1, time.Millisecond, 0) // default/p0000: the earliest deadline
		podsBoundOneByOne(e, "other", "n1", 5, time.Millisecond, 0)
		e.step(10 * time.Second)
		start := e.clk.Now()
		taintSince(e, "n1", t0)
		for range 25 {
			e.step(100 * time.Millisecond)
		}
		taintSince(e, "n2", t0) // decided late, at +2.5 s: its deadline passed long ago
		for range 100 {
			e.step(100 * time.Millisecond)
		}
		at, ok := del.get("default/p0000")
		require.True(t, ok)
		assert.Equal(t, 3*time.Second, at.Sub(start), "the next token after it was decided")
		for i := 3; i < 5; i++ {
			at, ok := del.get(fmt.Sprintf("other/p%04d", i))
			require.True(t, ok)
			assert.Equal(t, time.Duration(i+1)*time.Second, at.Sub(start), "other/p%04d waited one more token", i)
		}
	})
}
