package manager_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

// replicaSet stands in for a ReplicaSet controller and the kubelet: for each
// db pod gone it creates a replacement on node "spare", which becomes ready
// readyAfter later (never if readyAfter < 0).
type replicaSet struct {
	e          *env
	readyAfter time.Duration
	created    map[string]time.Time // replacement → when created
	replaced   map[string]bool      // original → replacement made
}

func (r *replicaSet) reconcile() {
	now := r.e.clk.Now()
	for _, name := range []string{"db-0", "db-1", "db-2"} {
		if r.e.exists(name) || r.replaced[name] {
			continue
		}
		r.replaced[name] = true
		repl := name + "-new"
		_, err := r.e.c.AddPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: repl, Namespace: "default", Labels: map[string]string{"app": "db"}},
			Spec:       v1.PodSpec{NodeName: "spare"},
		})
		require.NoError(r.e.t, err)
		r.created[repl] = now
	}
	for repl, at := range r.created {
		if r.readyAfter >= 0 && !now.Before(at.Add(r.readyAfter)) {
			require.NoError(r.e.t, r.e.c.SetPodReady("default", repl, true))
			delete(r.created, repl)
		}
	}
	r.e.settle()
}

// healthyDB counts the ready, not terminating db pods.
func healthyDB(e *env) int {
	n := 0
	for _, p := range e.c.ListPods() {
		if p.Labels["app"] != "db" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// A PodDisruptionBudget with minAvailable 2 over the 3 pods of a tainted
// node: the Eviction API lets one go at a time, as replacements become
// ready, never leaving fewer than 2 healthy; pods whose evictions are still
// refused at the hard deadline are deleted then, or never, by the setting.
func TestPDBEvictsOneAtATime(t *testing.T) {
	for _, c := range []struct {
		name       string
		readyAfter time.Duration
		fallback   time.Duration
	}{
		{"replacements become ready", 30 * time.Second, 0},
		{"replacements never ready, fallback after 5m", -1, 5 * time.Minute},
		{"replacements never ready, no fallback", -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, func(cfg *manager.Config) {
					cfg.UseEvictionAPI = true
					cfg.EvictionFallbackAfter = c.fallback
				})
				e.addNode("n1")
				e.addNode("spare")
				for i := range 3 {
					_, err := e.c.AddPod(&v1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i), Namespace: "default", Labels: map[string]string{"app": "db"}},
						Spec:       v1.PodSpec{NodeName: "n1", Tolerations: tolerating(10)},
					})
					require.NoError(t, err)
					require.NoError(t, e.c.SetPodReady("default", fmt.Sprintf("db-%d", i), true))
				}
				_, err := e.c.AddPDB(&policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
					Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
				})
				require.NoError(t, err)
				del := recordDeletions(e)
				rs := &replicaSet{e: e, readyAfter: c.readyAfter, created: map[string]time.Time{}, replaced: map[string]bool{}}
				start := e.clk.Now()
				e.taint("n1")

				var evictedAt []time.Duration
				seen := map[string]bool{}
				for range 60 * 60 {
					e.step(time.Second)
					rs.reconcile()
					if c.fallback == 0 || e.clk.Since(start) < 10*time.Second+c.fallback {
						// Only the fallback delete may break the budget.
						require.GreaterOrEqual(t, healthyDB(e), 2, "a budget was broken at %v", e.clk.Since(start))
					}
					for _, name := range []string{"db-0", "db-1", "db-2"} {
						if at, ok := del.get("default/" + name); ok && !seen[name] {
							seen[name] = true
							evictedAt = append(evictedAt, at.Sub(start))
						}
					}
				}
				s := e.manager().Stats()
				switch {
				case c.readyAfter >= 0:
					require.Len(t, evictedAt, 3)
					assert.Equal(t, 10*time.Second, evictedAt[0], "the first goes at its deadline")
					for i := 1; i < 3; i++ {
						assert.GreaterOrEqual(t, evictedAt[i]-evictedAt[i-1], 30*time.Second,
							"evicted before the previous one's replacement was ready")
					}
					assert.Equal(t, int64(3), s.EvictedByAPI)
					assert.Equal(t, int64(0), s.FallbackDeleted)
					assert.Greater(t, s.Refused, int64(0))
				case c.fallback > 0:
					require.Len(t, evictedAt, 3)
					assert.Equal(t, []time.Duration{10 * time.Second, 10*time.Second + 5*time.Minute, 10*time.Second + 5*time.Minute}, evictedAt)
					assert.Equal(t, int64(1), s.EvictedByAPI)
					assert.Equal(t, int64(2), s.FallbackDeleted)
				default:
					assert.Equal(t, []time.Duration{10 * time.Second}, evictedAt, "no fallback: the budget rules for ever")
					assert.Len(t, e.manager().Pending(), 2)
					assert.Equal(t, int64(0), s.Failed)
				}
			})
		})
	}
}
