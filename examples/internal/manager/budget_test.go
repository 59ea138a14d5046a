package manager_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

// deletions records when each pod was deleted, on the fake clock.
type deletions struct {
	mu sync.Mutex
	at map[string]time.Time // namespace/name → deletion time
}

func recordDeletions(e *env) *deletions {
	d := &deletions{at: map[string]time.Time{}}
	e.c.OnPod(func(old, new *v1.Pod) {
		if new == nil {
			d.mu.Lock()
			d.at[old.Namespace+"/"+old.Name] = e.clk.Now()
			d.mu.Unlock()
		}
	})
	return d
}

func (d *deletions) get(key string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.at[key]
	return t, ok
}

func (d *deletions) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.at)
}

// podsBoundOneByOne adds n pods to node, one every gap, each tolerating the
// taint for secs: their deadlines are distinct, gap apart. Returns the pods'
// deadlines by key given a taint older than every pod.
func podsBoundOneByOne(e *env, ns, node string, n int, gap time.Duration, secs int64) map[string]time.Time {
	deadlines := make(map[string]time.Time, n)
	for i := range n {
		p, err := e.c.AddPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%04d", i), Namespace: ns},
			Spec:       v1.PodSpec{NodeName: node, Tolerations: tolerating(secs)},
		})
		require.NoError(e.t, err)
		deadlines[ns+"/"+p.Name] = e.clk.Now().Add(time.Duration(secs) * time.Second)
		e.clk.Step(gap)
	}
	e.settle()
	return deadlines
}

// taintSince puts noExec on node with TimeAdded at since (in the past): the
// countdowns start at each pod's binding.
func taintSince(e *env, node string, since time.Time) {
	n, err := e.c.GetNode(node)
	require.NoError(e.t, err)
	n = n.DeepCopy()
	t := noExec
	t.TimeAdded = &metav1.Time{Time: since}
	n.Spec.Taints = []v1.Taint{t}
	require.NoError(e.t, e.c.UpdateNode(n))
	e.settle()
}

// A budget of 10/s with bursts of 5 spreads 1,000 due evictions over 99.5 s:
// 5 at once, then one every 100 ms, in deadline order, none lost. Every
// deadline has passed when the taint arrives, so all are due at once and
// start on many workers together: the order must not depend on which worker
// asks for a token first.
func TestBudgetSpreadsEvictionsInDeadlineOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) {
			c.EvictionRate, c.EvictionBurst = 10, 5
			c.Logger, c.Recorder = ptr.To(logr.Discard()), nil // 1,000 pods: keep the test log short
		})
		e.addNode("n1")
		del := recordDeletions(e)
		deadlines := podsBoundOneByOne(e, "default", "n1", 1000, time.Millisecond, 5)
		e.step(10 * time.Second) // every toleration has run out
		start := e.clk.Now()
		taintSince(e, "n1", t0)
		assert.Equal(t, 5, del.len(), "the burst goes at once")
		m := e.manager()
		assert.Len(t, m.Pending(), 995, "the rest wait, visible")
		for del.len() < 1000 && e.clk.Since(start) < 200*time.Second {
			e.step(100 * time.Millisecond)
		}
		require.Equal(t, 1000, del.len(), "none lost")
		var last time.Time
		type gone struct {
			key      string
			at, dead time.Time
		}
		var order []gone
		for key, dead := range deadlines {
			at, ok := del.get(key)
			require.True(t, ok, key)
			order = append(order, gone{key, at, dead})
			if at.After(last) {
				last = at
			}
		}
		took := last.Sub(start)
		assert.InDelta(t, 99.5, took.Seconds(), 1, "1,000 evictions at 10/s with bursts of 5")
		sort.Slice(order, func(i, j int) bool { return order[i].at.Before(order[j].at) })
		for i := 1; i < len(order); i++ {
			a, b := order[i-1], order[i]
			if a.at.Equal(b.at) {
				continue // one burst: deleted together
			}
			require.False(t, b.dead.Before(a.dead), "%s (deadline %v) deleted at %v, after %s (deadline %v) at %v",
				a.key, a.dead.Sub(t0), a.at.Sub(start), b.key, b.dead.Sub(t0), b.at.Sub(start))
		}
		s := m.Stats()
		assert.Equal(t, int64(1000), s.Evicted)
		assert.Equal(t, int64(995), s.BudgetWaits)
		assert.Empty(t, m.Pending())
		assert.Equal(t, 0, m.ScheduledEvictions())
	})
}

// With a budget per namespace, one namespace's backlog does not hold back
// another's eviction; with one budget for all, it waits its turn.
func TestBudgetPerNamespace(t *testing.T) {
	for _, perNS := range []bool{true, false} {
		t.Run(fmt.Sprintf("perNamespace=%v", perNS), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, func(c *manager.Config) {
					c.EvictionRate, c.EvictionBurst, c.EvictionRatePerNamespace = 1, 1, perNS
				})
				e.addNode("n1")
				e.addNode("n2")
				del := recordDeletions(e)
				podsBoundOneByOne(e, "busy", "n1", 20, time.Millisecond, 0)
				podsBoundOneByOne(e, "quiet", "n2", 1, time.Millisecond, 0)
				e.taint("n1")
				e.step(time.Second)
				e.taint("n2")
				_, gone := del.get("quiet/p0000")
				if perNS {
					assert.True(t, gone, "the quiet namespace's pod waited for the busy one's budget")
				} else {
					assert.False(t, gone, "one budget for all: the quiet pod waits its turn")
					for range 30 {
						e.step(time.Second)
					}
					_, gone = del.get("quiet/p0000")
					assert.True(t, gone)
				}
			})
		})
	}
}

// A pod that no longer has to go while it waits for a token leaves the line;
// the others keep their places and times.
func TestBudgetWaitEndsWhenThePodIsTolerated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) { c.EvictionRate, c.EvictionBurst = 1, 1 })
		e.addNode("n1")
		del := recordDeletions(e)
		podsBoundOneByOne(e, "default", "n1", 3, time.Millisecond, 0)
		start := e.clk.Now()
		e.taint("n1")
		require.Equal(t, 1, del.len())
		m := e.manager()
		require.Len(t, m.Pending(), 2)
		// p0001 holds the token of +1s; it now tolerates the taint forever.
		p := e.pod("p0001").DeepCopy()
		p.Spec.Tolerations = tolerating(-1)
		_, err := e.c.UpdatePod(p)
		require.NoError(t, err)
		e.settle()
		pending := m.Pending()
		require.Len(t, pending, 1)
		assert.Equal(t, "p0002", pending[0].Name)
		e.step(2*time.Second - time.Nanosecond)
		assert.Equal(t, 1, del.len(), "p0002 went before the token it reserved")
		e.step(time.Nanosecond)
		at, gone := del.get("default/p0002")
		require.True(t, gone)
		assert.Equal(t, 2*time.Second, at.Sub(start))
		e.step(time.Hour)
		assert.True(t, e.exists("p0001"))
		assert.Empty(t, m.Pending())
	})
}

// metricsRecorder is a manager.Metrics that keeps what it observes.
type metricsRecorder struct {
	mu           sync.Mutex
	delays, wait []float64
}

func (r *metricsRecorder) EvictionDelay(s float64) {
	r.mu.Lock()
	r.delays = append(r.delays, s)
	r.mu.Unlock()
}
func (r *metricsRecorder) BudgetWait(s float64) {
	r.mu.Lock()
	r.wait = append(r.wait, s)
	r.mu.Unlock()
}

// The delay from deadline to deletion and the wait for a token are observed
// in seconds, once per pod.
func TestMetricsObserveDelayAndBudgetWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &metricsRecorder{}
		e := newEnv(t, func(c *manager.Config) {
			c.Metrics = rec
			c.EvictionRate, c.EvictionBurst = 2, 1
		})
		e.addNode("n1")
		podsBoundOneByOne(e, "default", "n1", 3, 0, 0)
		e.taint("n1")
		e.step(500 * time.Millisecond)
		e.step(500 * time.Millisecond)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		assert.Equal(t, []float64{0, 0.5, 1}, rec.delays)
		assert.Equal(t, []float64{0.5, 1}, rec.wait)
	})
}
