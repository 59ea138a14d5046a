package manager_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
)

// Untolerating pods go at once, a 300 s pod at +300 s, a forever pod never;
// the DisruptionTarget condition is set before the delete.
func TestTaintEvictsByToleration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		var lastSeen sync.Map // name -> the pod as it was deleted
		e.c.OnPod(func(old, new *v1.Pod) {
			if new == nil {
				lastSeen.Store(old.Name, old)
			}
		})
		e.addPod("none", "n1", nil)
		e.addPod("t300", "n1", tolerating(300))
		e.addPod("forever", "n1", tolerating(-1))
		e.addPod("other-node", "n2", nil)

		e.taint("n1")
		assert.False(t, e.exists("none"), "untolerating pod not evicted at once")
		assert.True(t, e.exists("t300"))
		assert.True(t, e.exists("forever"))
		assert.True(t, e.exists("other-node"))
		// Each countdown is visible once. The eviction of "none" runs on a
		// queue worker while the handler goes on to "t300": only each pod's
		// own events are ordered.
		assert.ElementsMatch(t, []string{
			"Normal TaintManagerEviction Scheduled for deletion at 2025-01-01T00:00:00Z: taint node.kubernetes.io/unreachable:NoExecute not tolerated",
			"Normal TaintManagerEviction Scheduled for deletion at 2025-01-01T00:05:00Z: taint node.kubernetes.io/unreachable:NoExecute not tolerated after 300 s",
			"Normal TaintManagerEviction Marking for deletion Pod default/none",
		}, e.rec.take(), "countdowns are visible, each once")
		w, ok := e.manager().ScheduledEviction("default", "t300")
		require.True(t, ok)
		assert.Equal(t, t0.Add(300*time.Second), w.FireAt)

		e.step(300*time.Second - time.Nanosecond)
		assert.True(t, e.exists("t300"), "evicted before its toleration ran out")
		e.step(time.Nanosecond)
		assert.False(t, e.exists("t300"), "not evicted when its toleration ran out")

		e.step(24 * time.Hour)
		assert.True(t, e.exists("forever"))
		assert.True(t, e.exists("other-node"))

		p, ok := lastSeen.Load("none")
		require.True(t, ok)
		cond := findCondition(p.(*v1.Pod), v1.DisruptionTarget)
		require.NotNil(t, cond, "DisruptionTarget not set before the delete")
		assert.Equal(t, "DeletionByTaintManager", cond.Reason)
		assert.Equal(t, v1.ConditionTrue, cond.Status)
		assert.Equal(t, int64(2), e.manager().Stats().Evicted)
	})
}

func findCondition(p *v1.Pod, typ v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestTaintRemovedBeforeExpiryCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("t300", "n1", tolerating(300))
		e.taint("n1")
		e.step(100 * time.Second)
		assert.Equal(t, []string{"Normal TaintManagerEviction Scheduled for deletion at 2025-01-01T00:05:00Z: taint node.kubernetes.io/unreachable:NoExecute not tolerated after 300 s"}, e.rec.take())
		e.untaint("n1")
		assert.Equal(t, []string{"Normal TaintManagerEviction Cancelling deletion of Pod default/t300"}, e.rec.take())
		_, ok := e.manager().ScheduledEviction("default", "t300")
		assert.False(t, ok)
		e.step(time.Hour)
		assert.True(t, e.exists("t300"))
		assert.Equal(t, int64(1), e.manager().Stats().Cancelled)
	})
}

// Seed 003: taint, untaint and re-taint within a second still evicts, at the
// re-added taint's TimeAdded plus the toleration.
func TestTaintFlapStillEvicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("t30", "n1", tolerating(30))
		e.taint("n1")
		e.step(300 * time.Millisecond)
		e.untaint("n1")
		e.step(300 * time.Millisecond)
		e.taint("n1") // a new taint: TimeAdded is t0+600ms
		e.step(30*time.Second - time.Nanosecond)
		assert.True(t, e.exists("t30"), "evicted before the new taint's toleration ran out")
		e.step(time.Nanosecond)
		assert.False(t, e.exists("t30"), "flapping taint: pod never evicted")
	})
}

// Seed 003, the original's tombstone: after a successful eviction the key
// stayed in the queue and blocked every later eviction of a pod of that name.
func TestRecreatedPodEvictedAfterFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("web-0", "n1", nil)
		e.taint("n1")
		require.False(t, e.exists("web-0"))
		e.untaint("n1")
		e.addPod("web-0", "n1", nil) // the StatefulSet recreates it
		e.step(500 * time.Millisecond)
		e.taint("n1")
		assert.False(t, e.exists("web-0"), "recreated pod not evicted after the taint came back")
		assert.Equal(t, int64(2), e.manager().Stats().Evicted)
	})
}

func TestFailingDeleteIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t) // retries back off 1 s, 2 s, ...
		e.addNode("n1")
		e.addPod("flaky", "n1", nil)
		e.c.FailDeletes("default", "flaky", 2)
		e.taint("n1")
		assert.True(t, e.exists("flaky"))
		w, ok := e.manager().ScheduledEviction("default", "flaky")
		require.True(t, ok)
		assert.Equal(t, 1, w.Attempts)
		e.step(time.Second)
		assert.True(t, e.exists("flaky"))
		e.step(2*time.Second - time.Nanosecond)
		assert.True(t, e.exists("flaky"), "retried before its backoff")
		e.step(time.Nanosecond)
		assert.False(t, e.exists("flaky"), "not evicted on the third attempt")
		assert.Equal(t, 2, e.c.Stats().Injected)
		assert.Equal(t, 1, e.c.Stats().Deleted)
	})
}

func TestRetriesRunOutReportsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) {
			c.EvictionRetry = timedqueue.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second}
		})
		e.addNode("n1")
		e.addPod("stuck", "n1", nil)
		e.c.FailDeletes("default", "stuck", 100)
		e.taint("n1")
		e.step(time.Minute)
		assert.True(t, e.exists("stuck"))
		assert.Equal(t, int64(1), e.manager().Stats().Failed)
		assert.Equal(t, 0, e.manager().ScheduledEvictions())
		// The next update of the pod decides afresh.
		e.c.FailDeletes("default", "stuck", 0)
		p := e.pod("stuck").DeepCopy()
		p.Spec.Tolerations = tolerating(10)
		_, err := e.c.UpdatePod(p)
		require.NoError(t, err)
		e.settle()
		assert.False(t, e.exists("stuck"), "tolerations ran out long ago: evict at once")
	})
}

// A pod bound after the taint gets its full toleration from when it was bound.
func TestPodAddedLaterToTaintedNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.taint("n1")
		e.step(100 * time.Second)
		e.addPod("late-none", "n1", nil)
		assert.False(t, e.exists("late-none"))
		e.addPod("late-t300", "n1", tolerating(300))
		e.step(300*time.Second - time.Nanosecond)
		assert.True(t, e.exists("late-t300"))
		e.step(time.Nanosecond)
		assert.False(t, e.exists("late-t300"))
	})
}

func TestUnscheduledPodSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.taint("n1")
		e.addPod("pending", "", nil)
		assert.True(t, e.exists("pending"))
		assert.Equal(t, 0, e.manager().ScheduledEvictions())
		// Bound to the tainted node later: now it is handled.
		p := e.pod("pending").DeepCopy()
		p.Spec.NodeName = "n1"
		_, err := e.c.UpdatePod(p)
		require.NoError(t, err)
		e.settle()
		assert.False(t, e.exists("pending"))
	})
}

func TestNodeDeletedCancelsEvictions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("t300", "n1", tolerating(300))
		e.taint("n1")
		require.Equal(t, 1, e.manager().ScheduledEvictions())
		assert.Equal(t, []string{"Normal TaintManagerEviction Scheduled for deletion at 2025-01-01T00:05:00Z: taint node.kubernetes.io/unreachable:NoExecute not tolerated after 300 s"}, e.rec.take())
		require.NoError(t, e.c.DeleteNode("n1"))
		e.settle()
		assert.Equal(t, 0, e.manager().ScheduledEvictions())
		assert.Equal(t, []string{"Normal TaintManagerEviction Cancelling deletion of Pod default/t300"}, e.rec.take())
		e.step(time.Hour)
		assert.True(t, e.exists("t300"), "pods of a deleted node are the pod GC's business")
	})
}

func TestPodMovedToAnotherNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addNode("n2")
		e.addNode("n3")
		e.taint("n1")
		e.taint("n3")
		e.addPod("mover", "n1", tolerating(300))
		e.addPod("mover2", "n1", tolerating(300))
		e.step(100 * time.Second)

		move := func(name, node string) {
			p := e.pod(name).DeepCopy()
			p.Spec.NodeName = node
			_, err := e.c.UpdatePod(p)
			require.NoError(t, err)
			e.settle()
		}
		move("mover", "n2") // untainted: cancelled
		_, ok := e.manager().ScheduledEviction("default", "mover")
		assert.False(t, ok)
		move("mover2", "n3") // tainted: a fresh countdown from its new binding
		w, ok := e.manager().ScheduledEviction("default", "mover2")
		require.True(t, ok)
		assert.Equal(t, t0.Add(400*time.Second), w.FireAt)

		e.step(300*time.Second - time.Nanosecond)
		assert.True(t, e.exists("mover2"))
		e.step(time.Hour)
		assert.True(t, e.exists("mover"))
		assert.False(t, e.exists("mover2"))
	})
}

func TestTolerationsChangedToTolerate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(300))
		e.taint("n1")
		e.step(100 * time.Second)
		p := e.pod("p").DeepCopy()
		p.Spec.Tolerations = tolerating(-1)
		_, err := e.c.UpdatePod(p)
		require.NoError(t, err)
		e.settle()
		_, ok := e.manager().ScheduledEviction("default", "p")
		assert.False(t, ok)
		e.step(time.Hour)
		assert.True(t, e.exists("p"))
	})
}

// Tolerations that shorten the stay move the eviction earlier; a second
// taint with a shorter toleration does too.
func TestDeadlineMovesEarlier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		other := v1.Taint{Key: "example.com/maintenance", Effect: v1.TaintEffectNoExecute}
		tols := append(tolerating(300), v1.Toleration{Key: other.Key, Operator: v1.TolerationOpExists, TolerationSeconds: ptr.To[int64](60)})
		e.addPod("p", "n1", tols)
		e.taint("n1")
		e.step(100 * time.Second)
		e.taint("n1", noExec, other) // noExec keeps its TimeAdded
		w, ok := e.manager().ScheduledEviction("default", "p")
		require.True(t, ok)
		assert.Equal(t, t0.Add(160*time.Second), w.FireAt)
		e.step(60 * time.Second)
		assert.False(t, e.exists("p"))
	})
}

// A controller restart does not restart the countdown: the new manager
// computes the same deadline from the taint's TimeAdded.
func TestControllerRestartKeepsCountdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("t300", "n1", tolerating(300))
		e.taint("n1")
		e.step(200 * time.Second)
		e.stopManager()
		e.step(50 * time.Second) // down for a while
		e.start()
		w, ok := e.manager().ScheduledEviction("default", "t300")
		require.True(t, ok)
		assert.Equal(t, t0.Add(300*time.Second), w.FireAt)
		e.step(50*time.Second - time.Nanosecond)
		assert.True(t, e.exists("t300"))
		e.step(time.Nanosecond)
		assert.False(t, e.exists("t300"))
	})
}

// A restart after a deadline passed evicts at once.
func TestControllerRestartAfterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("t300", "n1", tolerating(300))
		e.taint("n1")
		e.stopManager()
		e.step(time.Hour)
		assert.True(t, e.exists("t300"))
		e.start()
		assert.False(t, e.exists("t300"))
	})
}

// The pod is deleted and recreated under the same name while its eviction
// is scheduled: the new pod gets its own countdown and is deleted only
// when that runs out.
func TestPodRecreatedWhileScheduled(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events bool // whether the manager sees the delete and the add
	}{
		{"events seen", true},
		// An informer can miss both (a relist): only the eviction's check
		// when it fires protects the new pod.
		{"events missed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.addNode("n1")
				old := e.addPod("web-0", "n1", tolerating(300))
				e.taint("n1")
				e.step(100 * time.Second)

				e.pause(!tc.events)
				require.NoError(t, e.c.DeletePod(context.Background(), "default", "web-0", metav1.DeleteOptions{}))
				e.settle()
				fresh := e.addPod("web-0", "n1", tolerating(300))
				e.pause(false)
				require.NotEqual(t, old.UID, fresh.UID)

				e.step(200 * time.Second) // the old pod's deadline
				assert.True(t, e.exists("web-0"), "the new pod was deleted by its predecessor's eviction")
				e.step(100*time.Second - time.Nanosecond)
				assert.True(t, e.exists("web-0"))
				e.step(time.Nanosecond)
				assert.False(t, e.exists("web-0"), "the new pod's own countdown did not evict it")
				assert.Equal(t, 0, e.c.Stats().Conflicts)
			})
		})
	}
}

// swapClient recreates the pod under the same name just before the first
// delete reaches the cluster, so the delete carries the old UID.
type swapClient struct {
	*cluster.Cluster
	once sync.Once
	t    *testing.T
}

func (s *swapClient) DeletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	s.once.Do(func() {
		require.NoError(s.t, s.Cluster.DeletePod(ctx, ns, name, metav1.DeleteOptions{}))
		_, err := s.Cluster.AddPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       v1.PodSpec{NodeName: "n1", Tolerations: tolerating(300)},
		})
		require.NoError(s.t, err)
	})
	return s.Cluster.DeletePod(ctx, ns, name, opts)
}

// The UID precondition: a pod replaced between the eviction's read and its
// delete is not deleted, and is decided afresh.
func TestDeleteCarriesUIDPrecondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := &swapClient{t: t}
		e := newEnv(t, func(c *manager.Config) { c.Client = sc })
		sc.Cluster = e.c
		e.addNode("n1")
		old := e.addPod("web-0", "n1", tolerating(300))
		e.taint("n1")
		e.step(300 * time.Second)
		require.Equal(t, 1, e.c.Stats().Conflicts, "the delete did not carry the UID it read")
		fresh := e.pod("web-0")
		assert.NotEqual(t, old.UID, fresh.UID)
		e.step(time.Minute) // the retry after the conflict
		assert.True(t, e.exists("web-0"))
		w, ok := e.manager().ScheduledEviction("default", "web-0")
		require.True(t, ok)
		assert.Equal(t, t0.Add(600*time.Second), w.FireAt, "the new pod's countdown")
		e.step(240 * time.Second)
		assert.False(t, e.exists("web-0"))
	})
}

// goneClient deletes the pod itself just before the eviction's delete
// reaches the cluster, as another controller (or a user) might.
type goneClient struct{ *cluster.Cluster }

func (g goneClient) DeletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	_ = g.Cluster.DeletePod(ctx, ns, name, metav1.DeleteOptions{})
	return g.Cluster.DeletePod(ctx, ns, name, opts)
}

// A pod already gone when the eviction deletes it (NotFound) is a success:
// counted as Gone, not retried, not a failure.
func TestPodAlreadyGoneIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gc := &goneClient{}
		e := newEnv(t, func(c *manager.Config) { c.Client = gc })
		gc.Cluster = e.c
		e.addNode("n1")
		e.addPod("p", "n1", nil)
		e.taint("n1")
		e.step(time.Hour)
		st := e.manager().Stats()
		assert.Equal(t, int64(1), st.Gone)
		assert.Equal(t, int64(0), st.Evicted)
		assert.Equal(t, int64(0), st.Failed)
		assert.Equal(t, 2, e.c.Stats().DeleteCalls, "the eviction's delete was retried after NotFound")
	})
}

func TestTerminatingPodSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(300))
		e.taint("n1")
		e.step(100 * time.Second)
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](3600)}))
		e.settle()
		e.step(200 * time.Second)
		assert.True(t, e.exists("p"), "a terminating pod was deleted again")
		assert.Equal(t, int64(1), e.manager().Stats().Terminating)
	})
}

// The eviction fires although the handler that should have cancelled it was
// never told (events lost): it decides again and drops itself.
func TestEvictionRechecksTaintsWhenItFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(300))
		e.taint("n1")
		e.pause(true)
		e.untaint("n1")
		e.pause(false)
		e.step(300 * time.Second)
		assert.True(t, e.exists("p"))
		assert.Equal(t, int64(1), e.manager().Stats().Dropped)
	})
}

func TestEventFiltering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(300))
		e.taint("n1")
		assert.Equal(t, []string{"Normal TaintManagerEviction Scheduled for deletion at 2025-01-01T00:05:00Z: taint node.kubernetes.io/unreachable:NoExecute not tolerated after 300 s"}, e.rec.take())
		m := e.manager()
		// Changes the manager ignores: labels, NoSchedule taints, status.
		n, err := e.c.GetNode("n1")
		require.NoError(t, err)
		n = n.DeepCopy()
		n.Labels = map[string]string{"a": "b"}
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "s", Effect: v1.TaintEffectNoSchedule})
		require.NoError(t, e.c.UpdateNode(n))
		e.settle()
		p := e.pod("p").DeepCopy()
		p.Labels = map[string]string{"a": "b"}
		_, err = e.c.UpdatePod(p)
		require.NoError(t, err)
		e.settle()
		w, ok := m.ScheduledEviction("default", "p")
		require.True(t, ok)
		assert.Equal(t, t0.Add(300*time.Second), w.FireAt)
		assert.Empty(t, e.rec.take())
	})
}

func TestNewValidatesConfig(t *testing.T) {
	c := cluster.New(nil)
	good := manager.Config{GetNode: c.GetNode, GetPod: c.GetPod, PodsOnNode: c.PodsOnNode, Client: c}
	for _, tc := range []struct {
		name string
		edit func(*manager.Config)
		want string
	}{
		{"no GetNode", func(c *manager.Config) { c.GetNode = nil }, "manager: GetNode must not be nil"},
		{"no GetPod", func(c *manager.Config) { c.GetPod = nil }, "manager: GetPod must not be nil"},
		{"no PodsOnNode", func(c *manager.Config) { c.PodsOnNode = nil }, "manager: PodsOnNode must not be nil"},
		{"no Client", func(c *manager.Config) { c.Client = nil }, "manager: Client must not be nil"},
		{"negative Shards", func(c *manager.Config) { c.Shards = -1 }, "manager: Shards must not be negative, got -1"},
		{"negative evictions", func(c *manager.Config) { c.MaxConcurrentEvictions = -2 }, "manager: MaxConcurrentEvictions must not be negative, got -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			_, err := manager.New(cfg)
			assert.EqualError(t, err, tc.want)
		})
	}
}

// A given logger is used as is: it gets the manager's logs. logr.Discard()
// (which equals the zero Logger) is a logger like any other.
func TestGivenLoggerIsUsedAsIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lines []string
		l := funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, prefix+" "+args)
		}, funcr.Options{})
		e := newEnv(t, func(c *manager.Config) { c.Logger = &l })
		e.stopManager()
		mu.Lock()
		require.NotEmpty(t, lines)
		assert.Contains(t, lines[0], "Starting NoExecute taint manager")
		mu.Unlock()

		e.start(func(c *manager.Config) { c.Logger = ptr.To(logr.Discard()) })
		e.addNode("n1")
		e.addPod("p", "n1", nil)
		e.taint("n1")
		assert.False(t, e.exists("p"))
	})
}

func TestRunTwiceAndShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(300))
		e.taint("n1")
		m := e.manager()
		second := make(chan struct{})
		go func() { defer close(second); m.Run(context.Background()) }()
		synctest.Wait()
		select {
		case <-second:
		default:
			t.Fatal("a second Run did not return at once")
		}
		e.stopManager()
		assert.Equal(t, 0, m.ScheduledEvictions(), "shutdown keeps scheduled evictions")
		e.step(time.Hour)
		assert.True(t, e.exists("p"), "an eviction ran after shutdown")
	})
}

func TestWaitIdleNeedsTrackIdle(t *testing.T) {
	c := cluster.New(nil)
	m, err := manager.New(manager.Config{GetNode: c.GetNode, GetPod: c.GetPod, PodsOnNode: c.PodsOnNode, Client: c})
	require.NoError(t, err)
	assert.EqualError(t, m.WaitIdle(context.Background()), "manager: WaitIdle needs Config.TrackIdle")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.Run(ctx) // returns at once, and stops the queue New started
}

// WaitIdle inside a bubble, with every change followed by it instead of
// synctest.Wait: it must return only once the evictions are done.
func TestWaitIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) { c.TrackIdle = true })
		m := e.manager()
		require.NoError(t, e.c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
		for i := range 20 {
			_, err := e.c.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default"},
				Spec: v1.PodSpec{NodeName: "n1", Tolerations: tolerating(int64(i % 2 * 10))}})
			require.NoError(t, err)
		}
		e.c.FailDeletes("default", "p2", 1)
		require.NoError(t, m.WaitIdle(context.Background()))
		require.NoError(t, e.c.SetTaints("n1", noExec))
		require.NoError(t, m.WaitIdle(context.Background()))
		assert.Equal(t, 11, e.c.NumPods(), "9 evicted at once, p2 waits for its retry, 10 wait 10s")
		e.clk.Step(time.Second)
		require.NoError(t, m.WaitIdle(context.Background()))
		assert.Equal(t, 10, e.c.NumPods())
		e.clk.Step(9 * time.Second)
		require.NoError(t, m.WaitIdle(context.Background()))
		assert.Equal(t, 0, e.c.NumPods())
	})
}

// Every event about a pod the manager has read names the pod by UID too, so
// that an event (kubectl describe, an events watch with a field selector on
// involvedObject.uid) is found for the pod it was about and not for a pod
// recreated under the same name.
func TestEventsCarryThePodUID(t *testing.T) {
	for _, c := range []struct {
		name   string
		cancel func(e *env)
	}{
		{"taint removed", func(e *env) { e.untaint("n1") }},
		{"pod now tolerates forever", func(e *env) { e.setTolerations("t300", tolerating(-1)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.addNode("n1")
				e.addPod("t300", "n1", tolerating(300))
				uid := e.pod("t300").UID
				require.NotEmpty(t, uid)
				e.taint("n1")
				e.step(100 * time.Second)
				assert.Equal(t, []string{"Normal TaintManagerEviction Scheduled for deletion at 2025-01-01T00:05:00Z: taint node.kubernetes.io/unreachable:NoExecute not tolerated after 300 s"}, e.rec.take())
				e.rec.takeRefs()
				c.cancel(e)
				assert.Equal(t, []string{"Normal TaintManagerEviction Cancelling deletion of Pod default/t300"}, e.rec.take())
				refs := e.rec.takeRefs()
				require.Len(t, refs, 1)
				assert.Equal(t, uid, refs[0].UID, "the Cancelling deletion event does not name the pod's UID")
			})
		})
	}
}
