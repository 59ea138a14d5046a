package tolerations_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// embedder is what a controller author writes from the README and go doc
// alone, embedding the library rather than the example manager: on every
// node update and every pod update it decides again, and schedules, moves or
// cancels the pod's deletion in a timedqueue; the deletion checks again
// when it fires. One node, pods in one namespace.
type embedder struct {
	clk        *testingclock.FakeClock
	countdowns *tolerations.Countdowns
	deletions  *timedqueue.TimedWorkerQueue[string]
	evicted    chan eviction

	mu   sync.Mutex
	node *v1.Node
	pods map[string]*v1.Pod // by name
}

type eviction struct {
	name string
	uid  types.UID
	at   time.Time
}

func newEmbedder(t *testing.T, clk *testingclock.FakeClock) *embedder {
	e := &embedder{
		clk:        clk,
		countdowns: tolerations.NewCountdowns(clk, tolerations.Matcher{}),
		evicted:    make(chan eviction, 10),
		pods:       make(map[string]*v1.Pod),
	}
	q, err := timedqueue.New(e.evict, timedqueue.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })
	e.deletions = q
	return e
}

func (e *embedder) nodeUpdated(node *v1.Node) {
	e.mu.Lock()
	e.node = node
	pods := make([]*v1.Pod, 0, len(e.pods))
	for _, p := range e.pods {
		pods = append(pods, p)
	}
	e.mu.Unlock()
	for _, p := range pods {
		e.decide(node, p)
	}
}

func (e *embedder) podUpdated(pod *v1.Pod) {
	e.mu.Lock()
	e.pods[pod.Name] = pod
	node := e.node
	e.mu.Unlock()
	e.decide(node, pod)
}

func (e *embedder) podDeleted(pod *v1.Pod) {
	e.mu.Lock()
	delete(e.pods, pod.Name)
	e.mu.Unlock()
	e.deletions.CancelWork(pod.Name)
	e.countdowns.ForgetPod(pod.Namespace, pod.Name)
}

func (e *embedder) decide(node *v1.Node, pod *v1.Pod) {
	switch d := e.countdowns.Decide(node, pod); d.Action {
	case tolerations.Never:
		e.deletions.CancelWork(pod.Name)
	default: // EvictAt, or EvictNow with At at or before now: runs at once
		e.deletions.UpdateWork(pod.Name, e.clk.Now(), d.At)
	}
}

// evict is the deletion's work func: it deletes the pod if it is still due.
func (e *embedder) evict(_ context.Context, name string) error {
	e.mu.Lock()
	pod, node := e.pods[name], e.node
	e.mu.Unlock()
	if pod == nil || e.countdowns.Recheck(node, pod).Action != tolerations.EvictNow {
		return nil // gone, or a newer decision moved or cancelled it
	}
	e.podDeleted(pod)
	e.evicted <- eviction{name: name, uid: pod.UID, at: e.clk.Now()}
	return nil
}

// evictedAt steps the clock to just before at and checks nothing was
// evicted, then to at and checks that pod was.
func (e *embedder) evictedAt(t *testing.T, pod *v1.Pod, at time.Time) {
	t.Helper()
	e.clk.SetTime(at.Add(-time.Nanosecond))
	synctest.Wait()
	require.Empty(t, e.evicted, "evicted before %v", at)
	e.clk.SetTime(at)
	synctest.Wait()
	require.Len(t, e.evicted, 1, "not evicted at %v", at)
	require.Equal(t, eviction{name: pod.Name, uid: pod.UID, at: at}, <-e.evicted)
}

// A taint with no TimeAdded (as
// kubelet's --register-with-taints sets it) and a pod with no PodScheduled
// condition (created with its node name), decided again on ten updates while
// the toleration runs, are evicted at first sight + 60 s; a pod deleted and
// recreated under the same name counts afresh.
func TestEmbedderEvictsUnknownStartsAtFirstSight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := testingclock.NewFakeClock(t0)
		e := newEmbedder(t, clk)
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
			Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}}},
		}
		newPod := func(uid types.UID) *v1.Pod {
			return &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: uid},
				Spec: v1.PodSpec{NodeName: "node-a", Tolerations: []v1.Toleration{{
					Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists,
					Effect: v1.TaintEffectNoExecute, TolerationSeconds: new(int64(60)),
				}}},
			}
		}
		// updates makes ten updates, 5 s apart, alternately of the node
		// (a label) and of the pod (an annotation), each a new object as an
		// informer delivers it.
		updates := func(pod *v1.Pod) *v1.Pod {
			for i := range 10 {
				clk.Step(5 * time.Second)
				if i%2 == 0 {
					node = node.DeepCopy()
					node.Labels = map[string]string{"update": time.Duration(i).String()}
					e.nodeUpdated(node)
				} else {
					pod = pod.DeepCopy()
					pod.Annotations = map[string]string{"update": time.Duration(i).String()}
					e.podUpdated(pod)
				}
				synctest.Wait()
				require.Empty(t, e.evicted, "evicted at update %d", i)
			}
			return pod
		}

		e.nodeUpdated(node) // the taint is first seen at t0
		clk.Step(7 * time.Second)
		pod := newPod("uid-1")
		e.podUpdated(pod) // the pod at t0+7s: its countdown starts here
		pod = updates(pod)
		e.evictedAt(t, pod, t0.Add(67*time.Second))

		// A pod under the same name: it counts from its own first sight, not
		// the evicted pod's...
		clk.Step(30 * time.Second)
		second := newPod("uid-2")
		e.podUpdated(second) // t0+97s
		clk.Step(20 * time.Second)
		e.podDeleted(second)
		// ... nor that of the pod deleted before it ran out.
		clk.Step(5 * time.Second)
		third := newPod("uid-3")
		e.podUpdated(third) // t0+122s
		third = updates(third)
		e.evictedAt(t, third, t0.Add(182*time.Second))

		clk.Step(time.Hour)
		synctest.Wait()
		require.Empty(t, e.evicted)
		pods, nodes := e.countdowns.Len()
		require.Equal(t, 0, pods, "pods remembered after the last one went")
		require.Equal(t, 1, nodes, "the tainted node is remembered")
	})
}
