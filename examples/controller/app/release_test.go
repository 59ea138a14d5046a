package app_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

// A leader whose view of the Lease is stale (it was paused; another replica
// took the Lease over meanwhile) and which then stops, releasing the Lease
// on its way out, leaves the new holder's Lease as it is: client-go's
// release reads the Lease and would write an empty holder with the fresh
// resourceVersion, since it checks whether it leads against the record it
// saw before.
func TestRunReleaseLeavesLeaseTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newFakeAPI(taintedNode("node-1", time.Now()))
		var takenOver atomic.Bool
		var writesAfter atomic.Int32 // replica-a's writes of the Lease after replica-b took it
		client.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if takenOver.Load() && (a.GetVerb() == "update" || a.GetVerb() == "create" || a.GetVerb() == "patch") {
				writesAfter.Add(1)
			}
			return false, nil, nil
		})
		o := leaderOptions("replica-a")
		r := start(t, client, o)
		synctest.Wait() // leading, between two renewals
		kubetest.RequireValue(t, o.Registry, 1, kube.MetricLeader)

		l := lease(t, client)
		require.Equal(t, "replica-a", *l.Spec.HolderIdentity)
		l.Spec.HolderIdentity = ptr.To("replica-b")
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		_, err := client.CoordinationV1().Leases(l.Namespace).Update(t.Context(), l, metav1.UpdateOptions{})
		require.NoError(t, err)
		takenOver.Store(true)

		assert.NoError(t, r.stop())
		assert.Equal(t, "replica-b", *lease(t, client).Spec.HolderIdentity, "the Lease's holder after replica-a released it")
		assert.Zero(t, writesAfter.Load(), "replica-a's writes of the Lease after replica-b took it")
	})
}
