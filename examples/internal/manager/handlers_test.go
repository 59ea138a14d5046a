package manager_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// Tests of handlers racing with evictions and with each other. Each one holds
// a lister call open (a gate) to force the interleaving it is about.

// gate blocks the next call that passes through it until released. The zero
// gate lets every call through.
type gate struct{ ch atomic.Pointer[chan struct{}] }

// arm makes the next pass block; the returned func releases it.
func (g *gate) arm() (release func()) {
	ch := make(chan struct{})
	g.ch.Store(&ch)
	return func() { close(ch) }
}

func (g *gate) pass() {
	if ch := g.ch.Swap(nil); ch != nil {
		<-*ch
	}
}

// A handler decides "evict now" while the pod's eviction is running and has
// read the node before the new taint (so that attempt is about to drop
// itself): the handler's decision wins, and the pod is evicted.
func TestTaintAddedWhileEvictionRunsStillEvicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g gate // blocks the eviction after it has read the node
		e := newEnv(t, func(c *manager.Config) {
			get := c.GetNode
			c.GetNode = func(name string) (*v1.Node, error) {
				n, err := get(name)
				g.pass()
				return n, err
			}
		})
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(100))
		e.taint("n1") // eviction at +100s
		e.step(100*time.Second - time.Nanosecond)

		tainted, err := e.c.GetNode("n1")
		require.NoError(t, err)
		// The informer delivers the next node events late (the normal case:
		// the cluster changes before the controller hears about it).
		e.pause(true)
		e.untaint("n1")
		release := g.arm()
		e.step(time.Nanosecond) // the eviction fires, reads the untainted node, waits
		other := v1.Taint{Key: "example.com/other", Effect: v1.TaintEffectNoExecute}
		e.taint("n1", other) // not tolerated at all
		retainted, err := e.c.GetNode("n1")
		require.NoError(t, err)
		e.pause(false)
		// The two late events, coalesced into one by the dispatcher.
		e.manager().NodeUpdated(tainted, retainted)
		e.settle()
		release() // the eviction decides Never from what it read
		e.settle()
		e.step(time.Hour)
		assert.False(t, e.exists("p"), "pod on a node with an untolerated NoExecute taint never evicted; scheduled=%d",
			e.manager().ScheduledEvictions())
	})
}

// gateListing makes PodsOnNode(node) pass through g once it has listed.
func gateListing(g *gate, node string) func(*manager.Config) {
	return func(c *manager.Config) {
		list := c.PodsOnNode
		c.PodsOnNode = func(name string) ([]*v1.Pod, error) {
			pods, err := list(name)
			if name == node {
				g.pass()
			}
			return pods, err
		}
	}
}

// A pod deleted and recreated under the same name on another node, while
// its old node's handler works from a list read before: the new node's
// shard schedules the new pod's eviction, and the old node's stale handler
// must not cancel it.
func TestPodRecreatedOnAnotherNodeKeepsItsEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g gate // blocks n1's handler after it has listed its pods
		e := newEnv(t, gateListing(&g, "n1"))
		// n1 and n2 are on different shards (FNV-1a % 8: 0 and 1).
		e.addNode("n1")
		e.addNode("n2")
		e.taint("n2")
		a := v1.Taint{Key: "example.com/a", Effect: v1.TaintEffectNoExecute}
		tols := append(tolerating(100), v1.Toleration{Key: a.Key, Operator: v1.TolerationOpExists})
		e.addPod("web-0", "n1", tols)

		release := g.arm()
		e.taint("n1", a) // tolerated forever; n1's handler lists [web-0] and waits
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "web-0", metav1.DeleteOptions{}))
		e.settle()
		e.addPod("web-0", "n2", tols) // its StatefulSet recreates it on n2
		w, ok := e.manager().ScheduledEviction("default", "web-0")
		require.True(t, ok, "n2's shard did not schedule the new pod's eviction")
		require.Equal(t, t0.Add(100*time.Second), w.FireAt)

		release() // n1's handler goes on with its stale list
		e.settle()
		w, ok = e.manager().ScheduledEviction("default", "web-0")
		require.True(t, ok, "the old node's stale handler cancelled the new pod's eviction")
		assert.Equal(t, t0.Add(100*time.Second), w.FireAt)
		e.step(100 * time.Second)
		assert.False(t, e.exists("web-0"), "pod on n2 outlived its 100s toleration")
	})
}

// A pod the manager holds nothing for is deleted and added again under the
// same name on the same node while the node's shard is busy: the add's own
// item decides for the new pod (it used to be merged into the delete's item,
// which is now skipped: see TestDeletedPodHeldNothingIsNotRead).
func TestPodRecreatedOnItsNodeWhileShardBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g gate // blocks n1's handler after it has listed its pods
		e := newEnv(t, gateListing(&g, "n1"))
		e.addNode("n1")
		e.taint("n1")
		e.addPod("web-0", "n1", tolerating(-1))
		_, ok := e.manager().ScheduledEviction("default", "web-0")
		require.False(t, ok, "a pod tolerating forever got an eviction")

		release := g.arm()
		n1, err := e.c.GetNode("n1")
		require.NoError(t, err)
		e.manager().NodeUpdated(nil, n1) // n1's handler lists [web-0] and waits
		e.settle()
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "web-0", metav1.DeleteOptions{}))
		e.addPod("web-0", "n1", nil) // tolerates nothing
		release()
		e.settle()
		assert.False(t, e.exists("web-0"), "the recreated pod, untolerating, was not evicted")
	})
}

// A deleted pod the manager holds nothing for (no countdown, schedule,
// status or budget slot) costs its delete event no lister read: for a pod
// the manager evicted, the usual case, the read would be a miss, an error
// allocated per pod.
func TestDeletedPodHeldNothingIsNotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		e := newEnv(t, func(c *manager.Config) {
			get := c.GetPod
			c.GetPod = func(ns, name string) (*v1.Pod, error) {
				reads.Add(1)
				return get(ns, name)
			}
		})
		e.addNode("n1")
		e.addPod("a", "n1", nil)
		e.addPod("b", "n1", tolerating(300))
		e.taint("n1") // a goes at once; b is scheduled
		require.False(t, e.exists("a"))
		_, ok := e.manager().ScheduledEviction("default", "b")
		require.True(t, ok)

		before := reads.Load()
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "b", metav1.DeleteOptions{}))
		e.settle()
		assert.Positive(t, reads.Load()-before, "the delete of a pod with a scheduled eviction was not read")
		_, ok = e.manager().ScheduledEviction("default", "b")
		assert.False(t, ok, "a deleted pod's eviction was not cancelled")

		e.addPod("c", "n1", tolerating(-1)) // tolerated forever: nothing held
		before = reads.Load()
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "c", metav1.DeleteOptions{}))
		e.settle()
		assert.Zero(t, reads.Load()-before, "the delete of a pod the manager held nothing for was read")
		pods, _ := e.manager().Remembered()
		assert.Zero(t, pods)
	})
}

// gatedWrites is the cluster as a PodClient whose status patches pass a
// gate before they are made, and whose deletes pass one after.
type gatedWrites struct {
	*cluster.Cluster
	beforeCondition, afterDelete *gate
}

func (c gatedWrites) SetPodCondition(ctx context.Context, ns, name string, uid types.UID, cond v1.PodCondition) error {
	c.beforeCondition.pass()
	return c.Cluster.SetPodCondition(ctx, ns, name, uid, cond)
}

func (c gatedWrites) DeletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	err := c.Cluster.DeletePod(ctx, ns, name, opts)
	c.afterDelete.pass()
	return err
}

// A decision repeated while the pod's eviction runs withdraws that attempt
// and schedules the eviction once more (see schedule), which finds the pod
// gone if the attempt removed it. If the pod's deletion is handled first,
// while the delete is still in flight or after it returned but before the
// eviction once more runs (here it waits a second for the budget's next
// token), the handler drops that schedule without a word: the pod went, and
// "Cancelling deletion" after "Marking for deletion" would tell its owner
// the opposite.
func TestOwnDeletionSeenEarlyRecordsNoCancel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight bool // the deletion is handled before the delete returns
	}{
		{name: "after the delete returned"},
		{name: "while the delete is in flight", inFlight: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := gatedWrites{beforeCondition: &gate{}, afterDelete: &gate{}}
				e := newEnv(t, func(c *manager.Config) {
					c.Client = &client
					c.EvictionRate, c.EvictionBurst = 1, 1
				})
				client.Cluster = e.c
				e.addNode("n1")
				web := e.addPod("web", "n1", nil)

				releaseCondition := client.beforeCondition.arm()
				e.taint("n1") // the eviction takes the token and waits to set the condition
				w, ok := e.manager().ScheduledEviction("default", "web")
				require.True(t, ok)
				require.True(t, w.Running, "the eviction is not running")
				// Another NoExecute taint: the node's handler decides again
				// while the attempt runs, withdraws it and schedules anew.
				e.taint("n1", noExec, v1.Taint{Key: "example.com/b", Effect: v1.TaintEffectNoExecute})
				if tc.inFlight {
					// The cluster tells of the deletion inside the delete,
					// which then waits before it returns.
					releaseDelete := client.afterDelete.arm()
					releaseCondition()
					e.settle()
					require.False(t, e.exists("web"))
					releaseDelete()
					e.settle()
				} else {
					e.pause(true) // the informer tells of the deletion late
					releaseCondition()
					e.settle()
					require.False(t, e.exists("web"))
					w, ok = e.manager().ScheduledEviction("default", "web")
					require.True(t, ok, "the repeated decision scheduled nothing")
					require.False(t, w.Running, "the eviction once more did not wait for its token")
					e.pause(false)
					e.manager().PodUpdated(web, nil)
					e.settle()
				}

				e.step(time.Minute)
				assert.Equal(t, []string{
					"Normal TaintManagerEviction Scheduled for deletion at 2025-01-01T00:00:00Z: taint node.kubernetes.io/unreachable:NoExecute not tolerated",
					"Normal TaintManagerEviction Marking for deletion Pod default/web",
				}, e.rec.take())
				st := e.manager().Stats()
				assert.Equal(t, int64(1), st.Deleted)
				assert.Zero(t, st.Cancelled, "the removed pod's eviction once more counted as cancelled")
				assert.Zero(t, e.manager().ScheduledEvictions())
				pods, _ := e.manager().Remembered()
				assert.Zero(t, pods, "the deleted pod's countdown is still remembered")
				assert.Zero(t, e.manager().RemovedRecords(), "the deleted pod is still recorded as removed")
			})
		})
	}
}
