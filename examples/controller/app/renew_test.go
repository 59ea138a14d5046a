package app_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/taintkit/taintkit/examples/controller/app"
)

// A leader whose renewals hang (a partition: no error, only silence) stops
// acting a renew deadline after its last successful renewal, whatever its
// elector is still waiting for: before any standby can take the expired
// Lease over, since the lease duration is longer.
func TestRunLeaderStopsWithinRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newFakeAPI(taintedNode("node-1", time.Now()), boundPod("web", "uid-web", "node-1", time.Now(), nil))
		var partitioned atomic.Bool
		var lastRenewal atomic.Int64
		release := make(chan struct{})
		client.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if partitioned.Load() {
				<-release // hangs, as a request into a black hole does until its timeout
				return true, nil, context.DeadlineExceeded
			}
			if a.GetVerb() == "update" || a.GetVerb() == "create" {
				lastRenewal.Store(time.Now().UnixNano())
			}
			return false, nil, nil
		})
		stopped := make(chan error, 1)
		o := leaderOptions("replica-a")
		o.BeforeDelete = func(ctx context.Context, _ *v1.Pod) {
			<-ctx.Done()
			stopped <- context.Cause(ctx)
		}
		r := start(t, client, o)
		synctest.Wait()
		require.Equal(t, "replica-a", *lease(t, client).Spec.HolderIdentity)

		partitioned.Store(true)
		select {
		case err := <-stopped:
			assert.ErrorIs(t, err, app.ErrLeaderLost)
			since := time.Since(time.Unix(0, lastRenewal.Load()))
			assert.LessOrEqual(t, since, o.RenewDeadline, "stopped acting %v after the last renewal", since)
		case <-time.After(2 * o.LeaseDuration):
			t.Errorf("still acting %v after the partition (renew deadline %v, lease %v)", 2*o.LeaseDuration, o.RenewDeadline, o.LeaseDuration)
		}
		close(release)
		assert.ErrorIs(t, r.wait(), app.ErrLeaderLost)
	})
}
