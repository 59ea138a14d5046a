package manager_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/examples/noexecute/cluster"
	"github.com/taintkit/taintkit/examples/noexecute/manager"
)

// Tests of pods deleted and recreated under the same name on another node,
// whose old node's shard handles the old pod's events late: what the manager
// records about a removed pod belongs to that pod (its UID), and a
// predecessor's late delete event never touches its successor's.

// wouldDeletes counts the "Would delete" events about the pod name, by UID.
func wouldDeletes(e *env, name string) map[string]int {
	n := map[string]int{}
	evs := e.rec.take()
	refs := e.rec.takeRefs()
	for i, ev := range evs {
		if strings.Contains(ev, "Would delete Pod default/"+name+" ") {
			n[string(refs[i].UID)]++
		}
	}
	return n
}

// Two shards (n1 on the first, n2 on the second). web is deleted while n1's
// handler is slow, recreated on n2 and "would be deleted" at once; then n1's
// worker handles the old web's delete event, and n2 changes again: the new
// web is not "would be deleted" a second time.
func TestDryRunOldDeleteEventKeepsTheNewPodsRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g gate // blocks n1's handler after it has listed its pods
		e := newEnv(t, gateListing(&g, "n1"), func(c *manager.Config) { c.DryRun, c.Shards = true, 2 })
		e.addNode("n1")
		e.addNode("n2")
		e.taint("n2")
		a := v1.Taint{Key: "example.com/a", Effect: v1.TaintEffectNoExecute}
		tolerateA := []v1.Toleration{{Key: a.Key, Operator: v1.TolerationOpExists}}
		e.addPod("web", "n1", tolerateA)

		release := g.arm()
		require.NoError(t, e.c.SetTaints("n1", a)) // tolerated
		e.settle()                                 // n1's handler lists [web] and waits
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "web", metav1.DeleteOptions{}))
		e.settle()                       // the delete event waits behind n1's handler
		e.addPod("web", "n2", tolerateA) // does not tolerate n2's taint
		require.Equal(t, int64(1), e.manager().Stats().DryRun, "the new web was not decided at once")

		release() // n1's worker goes on: its handler, then the old web's delete event
		e.settle()
		e.taint("n2", noExec, v1.Taint{Key: "example.com/b", Effect: v1.TaintEffectNoExecute}) // n2 changes: decided again
		assert.Equal(t, int64(1), e.manager().Stats().DryRun, "one pod, two 'Would delete'")
	})
}

// lateReturnClient deletes a pod, then holds the call's return until the
// test releases it: the pod's delete event is handled before the eviction
// learns that its delete succeeded, as when an informer's watch is faster
// than the API call's response.
type lateReturnClient struct {
	*cluster.Cluster
	hold chan struct{}
}

func (c *lateReturnClient) DeletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	err := c.Cluster.DeletePod(ctx, ns, name, opts)
	<-c.hold
	return err
}

// The record of a pod the manager removed is forgotten when the pod's delete
// event is handled, even if that is before the eviction's delete returns.
func TestRemovedRecordForgottenWhenTheDeleteEventIsHandledFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := &lateReturnClient{hold: make(chan struct{})}
		e := newEnv(t, func(c *manager.Config) {
			lc.Cluster = c.Client.(*cluster.Cluster)
			c.Client = lc
		})
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		e.taint("n1") // the delete is done and its event handled; the call has not returned
		require.False(t, e.exists("web"))
		close(lc.hold)
		e.settle()
		assert.Equal(t, int64(1), e.manager().Stats().Evicted)
		assert.Zero(t, e.manager().RemovedRecords(), "a removed pod's record outlived its delete event")
	})
}
