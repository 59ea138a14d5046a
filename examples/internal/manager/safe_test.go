package manager_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// scriptedEvicter is the cluster with an Eviction API whose answers a test
// scripts per pod: refused by a budget, throttled, or let through.
type scriptedEvicter struct {
	*cluster.Cluster
	mu       sync.Mutex
	refuse   map[string]int // pod name → refusals left (-1: for ever)
	throttle map[string]int // pod name → throttled answers left
	calls    []string
}

func newScriptedEvicter(c *cluster.Cluster) *scriptedEvicter {
	return &scriptedEvicter{Cluster: c, refuse: map[string]int{}, throttle: map[string]int{}}
}

func budgetRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: manager.CauseDisruptionBudget, Message: "The disruption budget pdb needs 2 healthy pods and has 2 currently"})
	return err
}

func (s *scriptedEvicter) EvictPod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	s.mu.Lock()
	s.calls = append(s.calls, name)
	if n := s.refuse[name]; n != 0 {
		s.refuse[name] = n - 1
		s.mu.Unlock()
		return budgetRefusal()
	}
	if n := s.throttle[name]; n > 0 {
		s.throttle[name] = n - 1
		s.mu.Unlock()
		return apierrors.NewTooManyRequests("too many requests, please try again later", 1)
	}
	s.mu.Unlock()
	return s.Cluster.DeletePod(ctx, namespace, name, opts)
}

func (s *scriptedEvicter) numCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// evictionEnv is an env whose manager evicts through a scriptedEvicter.
func evictionEnv(t *testing.T, tweak ...func(*manager.Config)) (*env, *scriptedEvicter) {
	var ev *scriptedEvicter
	e := newEnv(t, append([]func(*manager.Config){func(c *manager.Config) {
		ev = newScriptedEvicter(c.Client.(*cluster.Cluster))
		c.Client = ev
		c.UseEvictionAPI = true
		c.EvictionRetry = timedqueue.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second, MaxBackoff: time.Minute}
	}}, tweak...)...)
	return e, ev
}

func TestIsRefusedByBudget(t *testing.T) {
	assert.True(t, manager.IsRefusedByBudget(budgetRefusal()))
	assert.False(t, manager.IsRefusedByBudget(apierrors.NewTooManyRequests("throttled", 1)), "throttling is not a budget")
	assert.False(t, manager.IsRefusedByBudget(apierrors.NewConflict(v1.Resource("pods"), "p", nil)))
	assert.False(t, manager.IsRefusedByBudget(nil))
	assert.True(t, manager.IsRefusedByBudget(fmt.Errorf("wrapped: %w", budgetRefusal())))
}

func TestUseEvictionAPINeedsAnEvicter(t *testing.T) {
	c := cluster.New(nil)
	_, err := manager.New(manager.Config{GetNode: c.GetNode, GetPod: c.GetPod, PodsOnNode: c.PodsOnNode,
		Client: struct{ manager.PodClient }{c}, UseEvictionAPI: true})
	require.ErrorContains(t, err, "PodEvicter")
	for _, bad := range []func(*manager.Config){
		func(c *manager.Config) { c.EvictionRate = -1 },
		func(c *manager.Config) { c.EvictionBurst = -1 },
		func(c *manager.Config) { c.EvictionFallbackAfter = -time.Second },
	} {
		cfg := manager.Config{GetNode: c.GetNode, GetPod: c.GetPod, PodsOnNode: c.PodsOnNode, Client: c}
		bad(&cfg)
		_, err := manager.New(cfg)
		assert.Error(t, err)
	}
}

// A disruption budget's refusals are not failures: they do not use up the
// retry limit (2 attempts here), back off 1 s, 2 s, 4 s, keep the deadline,
// hold no eviction slot, and the pod goes once the budget allows it. The
// manager does not set DisruptionTarget itself before a request that may be
// refused.
func TestBudgetRefusalIsRetriedNotFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ev := evictionEnv(t, func(c *manager.Config) { c.MaxConcurrentEvictions = 1 })
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		e.addPod("other", "n1", tolerating(2))
		del := recordDeletions(e)
		ev.refuse["web"] = 3
		start := e.clk.Now()
		e.taint("n1")
		m := e.manager()
		p := m.Pending()
		require.Len(t, p, 2)
		assert.Equal(t, "web", p[0].Name)
		assert.Equal(t, 1, p[0].Attempts)
		// The server's message, as the error says it, not as the queue's
		// RetryAt wraps it (with the retry time in Go's clock format).
		assert.Equal(t, budgetRefusal().Error(), p[0].LastError)
		assert.Equal(t, start, p[0].Deadline)
		assert.Equal(t, noExec.Key, p[0].Taint.Key)
		assert.Equal(t, "n1", p[0].Node)
		assert.Equal(t, e.pod("web").UID, p[0].UID)
		assert.Nil(t, findCondition(e.pod("web"), v1.DisruptionTarget), "DisruptionTarget set on a pod whose eviction was refused")

		e.step(time.Second) // +1 s: second refusal, retry at +3 s
		p = m.Pending()
		require.Len(t, p, 2)
		assert.Equal(t, 2, p[0].Attempts)
		assert.Equal(t, budgetRefusal().Error(), p[0].LastError)
		e.step(2 * time.Second) // +3 s: third refusal, retry at +7 s
		_, gone := del.get("default/other")
		assert.True(t, gone, "a refused eviction held the only eviction slot")
		p = m.Pending()
		require.Len(t, p, 1)
		assert.Equal(t, 3, p[0].Attempts)
		assert.Equal(t, start, p[0].Deadline, "refusals moved the deadline")
		e.step(4*time.Second - time.Nanosecond)
		require.True(t, e.exists("web"))
		e.step(time.Nanosecond) // +7 s: allowed
		at, gone := del.get("default/web")
		require.True(t, gone)
		assert.Equal(t, 7*time.Second, at.Sub(start))
		s := m.Stats()
		assert.Equal(t, int64(3), s.Refused)
		assert.Equal(t, int64(2), s.EvictedByAPI)
		assert.Equal(t, int64(0), s.Failed)
		assert.Equal(t, int64(0), s.Deleted)
		assert.Empty(t, m.Pending())
		warnings := 0
		for _, ev := range e.rec.take() {
			if strings.HasPrefix(ev, "Warning") {
				warnings++
				assert.Contains(t, ev, "refused by a disruption budget; retrying, never falls back")
			}
		}
		assert.Equal(t, 1, warnings, "one warning per refused eviction, not per refusal")
	})
}

// API throttling (a 429 without the budget's cause) is an ordinary failure:
// it uses up the retry limit.
func TestThrottlingIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ev := evictionEnv(t)
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		ev.throttle["web"] = 5
		e.taint("n1")
		e.step(time.Minute)
		assert.True(t, e.exists("web"))
		s := e.manager().Stats()
		assert.Equal(t, int64(1), s.Failed)
		assert.Equal(t, int64(0), s.Refused)
		assert.Equal(t, 2, ev.numCalls(), "MaxAttempts 2")
	})
}

// Past the fallback deadline, a refused eviction becomes a delete, exactly
// at the deadline (the backoff is cut short to meet it), with
// DisruptionTarget set first and a warning; with no fallback it is retried
// for ever.
func TestFallbackDelete(t *testing.T) {
	for _, after := range []time.Duration{30 * time.Second, 0} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, ev := evictionEnv(t, func(c *manager.Config) { c.EvictionFallbackAfter = after })
				e.addNode("n1")
				e.addPod("db", "n1", tolerating(10))
				var last *v1.Pod
				var at time.Time
				e.c.OnPod(func(old, new *v1.Pod) {
					if new == nil {
						last, at = old, e.clk.Now()
					}
				})
				ev.refuse["db"] = -1
				start := e.clk.Now()
				e.taint("n1")
				for range 39 {
					e.step(time.Second)
				}
				e.step(time.Second - time.Nanosecond)
				require.True(t, e.exists("db"), "deleted before the fallback deadline")
				e.step(time.Nanosecond)
				m := e.manager()
				if after == 0 {
					for range 60 {
						e.step(time.Minute)
					}
					assert.True(t, e.exists("db"), "no fallback: the budget rules")
					p := m.Pending()
					require.Len(t, p, 1)
					assert.Greater(t, p[0].Attempts, 60, "refusals retried at the backoff's cap")
					assert.Equal(t, start.Add(10*time.Second), p[0].Deadline)
					assert.Equal(t, int64(0), m.Stats().Failed)
					return
				}
				require.False(t, e.exists("db"), "not deleted at the fallback deadline")
				assert.Equal(t, 40*time.Second, at.Sub(start))
				cond := findCondition(last, v1.DisruptionTarget)
				require.NotNil(t, cond, "the fallback delete sets DisruptionTarget first")
				assert.Equal(t, tolerations.ReasonDeletionByTaintManager, cond.Reason)
				s := m.Stats()
				assert.Equal(t, int64(1), s.FallbackDeleted)
				assert.Equal(t, int64(1), s.Evicted)
				assert.Equal(t, int64(0), s.EvictedByAPI)
				assert.GreaterOrEqual(t, s.Refused, int64(5))
				var fallback []string
				for _, ev := range e.rec.take() {
					if strings.Contains(ev, "Deleting Pod") {
						fallback = append(fallback, ev)
					}
				}
				require.Len(t, fallback, 1)
				assert.True(t, strings.HasPrefix(fallback[0], "Warning"))
			})
		})
	}
}

// A refused eviction whose pod becomes tolerated is left alone: each retry
// decides afresh.
func TestRefusedPodThatBecomesToleratedStays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, ev := evictionEnv(t)
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		ev.refuse["web"] = -1
		e.taint("n1")
		require.Equal(t, 1, ev.numCalls())
		p := e.pod("web").DeepCopy()
		p.Spec.Tolerations = tolerating(-1)
		_, err := e.c.UpdatePod(p)
		require.NoError(t, err)
		e.step(time.Hour)
		assert.Equal(t, 1, ev.numCalls())
		assert.True(t, e.exists("web"))
		assert.Empty(t, e.manager().Pending())
	})
}

// timedRecorder records events with the fake clock's time and the pod's UID.
type timedRecorder struct {
	e  *env
	mu sync.Mutex
	ev []timedEvent
}

type timedEvent struct {
	at  time.Duration
	uid types.UID
	msg string
}

func (r *timedRecorder) Eventf(obj runtime.Object, _, _, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev = append(r.ev, timedEvent{r.e.clk.Since(t0), obj.(*v1.ObjectReference).UID, fmt.Sprintf(format, args...)})
}

// decision is a pod's first decision: the countdown's message (its action,
// deadline and taint) and when the pod went (or would have). Pods with equal
// deadlines take a budget's tokens in the order their handlers scheduled
// them, which depends on the shards' interleaving: so removal times are
// compared as a multiset, and per pod only whether it went.
type decision struct {
	scheduled string
	removedAt time.Duration
}

func splitDecisions(m map[types.UID]decision) (map[types.UID]decision, []time.Duration) {
	var times []time.Duration
	out := make(map[types.UID]decision, len(m))
	for uid, d := range m {
		if d.removedAt != 0 {
			times = append(times, d.removedAt)
			d.removedAt = 1
		}
		out[uid] = d
	}
	slices.Sort(times)
	return out, times
}

// playHistory plays one cluster history: nodes tainted and untainted, pods
// created over time with various tolerations, some with no PodScheduled
// time. It returns the first decision per pod UID.
func playHistory(t *testing.T, dryRun bool) (map[types.UID]decision, manager.Stats, int) {
	var out map[types.UID]decision
	var stats manager.Stats
	var pods int
	synctest.Test(t, func(t *testing.T) {
		rec := &timedRecorder{}
		e := newEnv(t, func(c *manager.Config) {
			c.DryRun, c.Recorder, c.Logger = dryRun, rec, ptr.To(logr.Discard())
			c.EvictionRate, c.EvictionBurst = 2, 2
		})
		rec.e = e
		rng := rand.New(rand.NewPCG(7, 11))
		for _, n := range []string{"n1", "n2", "n3"} {
			e.addNode(n)
		}
		for i := range 120 {
			node := fmt.Sprintf("n%d", 1+rng.IntN(3))
			var tols []v1.Toleration
			switch rng.IntN(4) {
			case 1:
				tols = tolerating(-1)
			case 2, 3:
				tols = tolerating(int64(rng.IntN(40)))
			}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%03d", i), Namespace: "default"},
				Spec: v1.PodSpec{NodeName: node, Tolerations: tols}}
			var err error
			if rng.IntN(3) == 0 {
				_, err = e.c.AddPodAsIs(pod)
			} else {
				_, err = e.c.AddPod(pod)
			}
			require.NoError(t, err)
			e.settle()
			switch rng.IntN(10) {
			case 0:
				require.NoError(t, e.c.SetTaints(node, noExec))
			case 1:
				require.NoError(t, e.c.SetTaints(node))
			}
			e.settle()
			e.step(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		e.step(10 * time.Minute)
		rec.mu.Lock()
		out = map[types.UID]decision{}
		for _, ev := range rec.ev {
			d := out[ev.uid]
			switch {
			case strings.HasPrefix(ev.msg, "Scheduled for deletion") && d.scheduled == "":
				d.scheduled = ev.msg
			case (strings.HasPrefix(ev.msg, "Marking for deletion") || strings.HasPrefix(ev.msg, "Would delete")) && d.removedAt == 0:
				d.removedAt = ev.at
			}
			out[ev.uid] = d
		}
		rec.mu.Unlock()
		stats = e.manager().Stats()
		pods = e.c.NumPods()
	})
	return out, stats, pods
}

// A dry run decides and times every eviction as a real run does, through an
// eviction budget too, and leaves every pod in place.
func TestDryRunDecidesAsARealRun(t *testing.T) {
	real, realStats, realLeft := playHistory(t, false)
	dry, dryStats, dryLeft := playHistory(t, true)
	require.NotEmpty(t, real)
	realD, realTimes := splitDecisions(real)
	dryD, dryTimes := splitDecisions(dry)
	assert.Equal(t, realD, dryD, "first decision per pod UID")
	assert.Equal(t, realTimes, dryTimes, "times of the deletions")
	assert.Equal(t, 120, dryLeft, "a dry run wrote to a pod")
	assert.Less(t, realLeft, 120)
	assert.Equal(t, realStats.Evicted, dryStats.DryRun)
	assert.Equal(t, int64(0), dryStats.Evicted)
	assert.Greater(t, dryStats.BudgetWaits, int64(0), "the history should make evictions wait for the budget")
	assert.Equal(t, realStats.BudgetWaits, dryStats.BudgetWaits)
}

// A dry run records "would delete" once per pod UID, however often the pod
// is decided again.
func TestDryRunRecordsOncePerUID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) { c.DryRun = true })
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		e.taint("n1")
		for range 3 { // node updates decide again
			e.untaint("n1")
			e.taint("n1")
			e.step(time.Second)
		}
		var would int
		for _, ev := range e.rec.take() {
			if strings.Contains(ev, "Would delete Pod default/web") {
				would++
			}
		}
		assert.Equal(t, 1, would)
		assert.True(t, e.exists("web"))
		// A new pod under the same name is another pod.
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "web", metav1.DeleteOptions{}))
		e.settle()
		e.addPod("web", "n1", nil)
		e.step(time.Second)
		would = 0
		for _, ev := range e.rec.take() {
			if strings.Contains(ev, "Would delete Pod default/web") {
				would++
			}
		}
		assert.Equal(t, 1, would)
		assert.Equal(t, int64(2), e.manager().Stats().DryRun)
	})
}

// Pending shows exactly the evictions a model says are scheduled, with their
// deadlines and taints, after every step of a random scenario.
func TestPendingMatchesTheModel(t *testing.T) {
	taintA := noExec
	taintB := v1.Taint{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoExecute}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, func(c *manager.Config) { c.Logger, c.Recorder = ptr.To(logr.Discard()), nil })
				rng := rand.New(rand.NewPCG(seed, 99))
				nodes := []string{"n1", "n2", "n3"}
				for _, n := range nodes {
					e.addNode(n)
				}
				tol := func(t v1.Taint, secs int) v1.Toleration {
					x := v1.Toleration{Key: t.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
					if secs >= 0 {
						x.TolerationSeconds = ptr.To(int64(secs))
					}
					return x
				}
				next := 0
				for step := range 300 {
					switch op := rng.IntN(10); {
					case op < 4:
						var tols []v1.Toleration
						for _, t := range []v1.Taint{taintA, taintB} {
							if rng.IntN(4) > 0 {
								tols = append(tols, tol(t, rng.IntN(80)-5)) // some forever
							}
						}
						_, err := e.c.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", next), Namespace: "default"},
							Spec: v1.PodSpec{NodeName: nodes[rng.IntN(3)], Tolerations: tols}})
						require.NoError(t, err)
						next++
					case op < 5:
						if pods := e.c.ListPods(); len(pods) > 0 {
							p := pods[rng.IntN(len(pods))]
							require.NoError(t, e.c.DeletePod(context.Background(), p.Namespace, p.Name, metav1.DeleteOptions{}))
						}
					case op < 7:
						var taints []v1.Taint
						for _, t := range []v1.Taint{taintA, taintB} {
							if rng.IntN(2) == 0 {
								taints = append(taints, t)
							}
						}
						require.NoError(t, e.c.SetTaints(nodes[rng.IntN(3)], taints...))
					default:
						e.clk.Step(time.Duration(rng.IntN(20000)) * time.Millisecond)
					}
					e.settle()
					checkPending(t, e, step)
				}
			})
		})
	}
}

func checkPending(t *testing.T, e *env, step int) {
	t.Helper()
	now := e.clk.Now()
	var want []manager.PendingEviction
	for _, p := range e.c.ListPods() {
		n, err := e.c.GetNode(p.Spec.NodeName)
		require.NoError(t, err)
		boundAt, _ := tolerations.PodBoundAt(p)
		d := tolerations.Decide(n.Spec.Taints, p.Spec.Tolerations, boundAt, now)
		switch d.Action {
		case tolerations.EvictNow:
			t.Fatalf("step %d: pod %s is due (%v) but still there", step, p.Name, d)
		case tolerations.EvictAt:
			want = append(want, manager.PendingEviction{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
				Node: p.Spec.NodeName, Taint: d.Taint, Deadline: d.At})
		}
	}
	slices.SortFunc(want, func(a, b manager.PendingEviction) int {
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	got := e.manager().Pending()
	require.Len(t, got, len(want), "step %d", step)
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.Name, g.Name, "step %d, entry %d", step, i)
		require.True(t, w.Deadline.Equal(g.Deadline), "step %d %s: deadline %v, want %v", step, w.Name, g.Deadline, w.Deadline)
		require.Equal(t, w.UID, g.UID)
		require.Equal(t, w.Node, g.Node)
		require.Equal(t, w.Taint.Key, g.Taint.Key, "step %d %s", step, w.Name)
		require.Zero(t, g.Attempts)
	}
}
