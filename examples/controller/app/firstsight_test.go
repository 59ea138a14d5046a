package app_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
)

// A taint with no TimeAdded and a pod with no PodScheduled time: the
// countdown counts from when the controller first saw them. A standby sees
// them too (its caches are warm), and when it takes over it ends the
// countdown at the deadline counted from its own first sight, the old
// leader's give or take an informer's delivery, not a countdown restarted
// at the takeover.
func TestRunStandbyRemembersFirstSight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		node := taintedNode("node-1", t0)
		node.Spec.Taints[0].TimeAdded = nil
		pod := boundPod("daemon", "uid-daemon", "node-1", t0, ptr.To(10*time.Second))
		pod.Status.Conditions = nil // created with its node name: never scheduled
		client := newFakeAPI(node, pod)
		oa, ob := leaderOptions("replica-a"), leaderOptions("replica-b")
		a := start(t, client, oa)
		synctest.Wait()
		b := start(t, client, ob)
		synctest.Wait()
		require.Equal(t, "replica-a", *lease(t, client).Spec.HolderIdentity)
		requireValue(t, oa.Registry, 1, app.MetricEvictionsPending)

		time.Sleep(4 * time.Second)
		assert.NoError(t, a.stop())
		time.Sleep(time.Duration(float64(ob.RetryPeriod) * (1 + leaderelection.JitterFactor)))
		synctest.Wait()
		require.Equal(t, "replica-b", *lease(t, client).Spec.HolderIdentity)
		requireValue(t, ob.Registry, 1, app.MetricEvictionsPending)

		time.Sleep(t0.Add(10*time.Second).Sub(time.Now()) - time.Millisecond)
		synctest.Wait()
		assert.True(t, podExists(t, client, "daemon"), "deleted before the deadline")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.False(t, podExists(t, client, "daemon"), "not deleted at the deadline counted from first sight (%s)", t0.Add(10*time.Second))
		assert.NoError(t, b.stop())
	})
}
