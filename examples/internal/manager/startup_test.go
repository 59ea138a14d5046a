package manager_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

// A manager starting on a healthy cluster (no NoExecute taint anywhere)
// has nothing to decide: it reads no pod, neither for its node's addition
// nor for its own. Then a taint on one node reads that node's pods and
// evicts the untolerated one, as ever; and a pod added to an untainted
// node later costs no read either.
func TestStartOnHealthyClusterReadsNoPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gets, lists atomic.Int64
		countReads := func(c *manager.Config) {
			get, list := c.GetPod, c.PodsOnNode
			c.GetPod = func(ns, name string) (*v1.Pod, error) { gets.Add(1); return get(ns, name) }
			c.PodsOnNode = func(node string) ([]*v1.Pod, error) { lists.Add(1); return list(node) }
		}
		e := newEnv(t, countReads)
		e.stopManager()
		for n := range 10 {
			node := fmt.Sprintf("n%d", n)
			require.NoError(t, e.c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
			for p := range 20 {
				_, err := e.c.AddPod(&v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-p%d", node, p), Namespace: "default"},
					Spec:       v1.PodSpec{NodeName: node},
				})
				require.NoError(t, err)
			}
		}
		e.start(countReads) // replays 10 nodes and 200 pods, as an informer's initial list
		assert.Zero(t, gets.Load(), "pods read at start-up")
		assert.Zero(t, lists.Load(), "nodes' pods listed at start-up")

		e.taint("n3")
		assert.Equal(t, int64(1), lists.Load(), "the tainted node's pods are listed once")
		assert.False(t, e.exists("n3-p0"), "an untolerated pod on the tainted node was not evicted")
		assert.True(t, e.exists("n4-p0"), "a pod on an untainted node was evicted")

		before := gets.Load()
		e.addPod("late", "n5", nil)
		assert.Equal(t, before, gets.Load(), "a pod added to an untainted node was read")
		e.addPod("late-on-tainted", "n3", nil)
		assert.False(t, e.exists("late-on-tainted"), "a pod added to a tainted node was not evicted")
	})
}
