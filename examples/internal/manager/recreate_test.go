package manager_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
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

// One "Would delete" per pod UID across many recreations of a pod under the
// same name, each on another node, with the old node's shard (and at times
// the new one's) busy in a slow handler when the old pod goes and the new one
// comes; after each round every node changes, and every pod is decided again.
func TestDryRunOneWouldDeletePerUIDAcrossRecreations(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				nodes := []string{"n1", "n2", "n3", "n4"} // shards 0, 1, 0, 1 of 2
				gates := map[string]*gate{}
				for _, n := range nodes {
					gates[n] = &gate{}
				}
				e := newEnv(t, func(c *manager.Config) {
					c.DryRun, c.Shards, c.Logger = true, 2, ptr.To(logr.Discard())
					list := c.PodsOnNode
					c.PodsOnNode = func(name string) ([]*v1.Pod, error) {
						pods, err := list(name)
						gates[name].pass()
						return pods, err
					}
				})
				extra := v1.Taint{Key: "example.com/extra", Effect: v1.TaintEffectNoExecute}
				hasExtra := map[string]bool{}
				toggle := func(n string) { // a change of n's NoExecute taints: its handler lists its pods
					hasExtra[n] = !hasExtra[n]
					taints := []v1.Taint{noExec}
					if hasExtra[n] {
						taints = append(taints, extra)
					}
					require.NoError(t, e.c.SetTaints(n, taints...))
				}
				for _, n := range nodes {
					e.addNode(n)
					e.taint(n) // web tolerates nothing: each web would be deleted at once
				}
				rng := rand.New(rand.NewPCG(seed, 17))
				at := nodes[rng.IntN(len(nodes))]
				uids := []types.UID{e.addPod("web", at, nil).UID}
				const rounds = 12
				for range rounds {
					next := nodes[rng.IntN(len(nodes))]
					var releases []func()
					releases = append(releases, gates[at].arm())
					toggle(at)
					e.settle() // at's handler lists the old web and waits
					if next != at && rng.IntN(2) == 0 {
						releases = append(releases, gates[next].arm())
						toggle(next)
						e.settle() // next's handler waits too: the new web's add queues behind it
					}
					require.NoError(t, e.c.DeletePod(context.Background(), "default", "web", metav1.DeleteOptions{}))
					e.settle()
					uids = append(uids, e.addPod("web", next, nil).UID)
					rng.Shuffle(len(releases), func(i, j int) { releases[i], releases[j] = releases[j], releases[i] })
					for _, release := range releases {
						release()
						e.settle()
					}
					for _, n := range nodes {
						toggle(n)
						e.settle()
					}
					at = next
				}
				got := wouldDeletes(e, "web")
				want := map[string]int{}
				for _, uid := range uids {
					want[string(uid)] = 1
				}
				assert.Equal(t, want, got, "'Would delete' events by UID")
				assert.Equal(t, int64(rounds+1), e.manager().Stats().DryRun)
			})
		})
	}
}
