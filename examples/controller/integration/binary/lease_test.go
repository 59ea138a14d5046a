package binary_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
)

// leaseState is the controller's Lease as a test reads it.
type leaseState struct {
	holder      string
	acquired    time.Time
	transitions int32
	observed    time.Time // when the test's watch delivered this state
}

func leaseStateOf(l *coordinationv1.Lease) *leaseState {
	s := &leaseState{
		holder:      ptr.Deref(l.Spec.HolderIdentity, ""),
		transitions: ptr.Deref(l.Spec.LeaseTransitions, 0),
		observed:    time.Now(),
	}
	if l.Spec.AcquireTime != nil {
		s.acquired = l.Spec.AcquireTime.Time
	}
	return s
}

// waitForLease watches the controller's Lease until cond holds for it
// (the Lease may not exist yet), and returns that state.
func waitForLease(t *testing.T, ctx context.Context, c kubernetes.Interface, cond func(*leaseState) bool) *leaseState {
	t.Helper()
	leases := c.CoordinationV1().Leases(leaseNamespace)
	sel := "metadata.name=" + leaseName
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return leases.Watch(ctx, o)
		},
	}
	var found *leaseState
	check := func(obj any) bool {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return false
		}
		if s := leaseStateOf(l); cond(s) {
			found = s
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &coordinationv1.Lease{},
		func(store cache.Store) (bool, error) {
			obj, ok, err := store.GetByKey(leaseNamespace + "/" + leaseName)
			return ok && check(obj), err
		},
		func(ev watch.Event) (bool, error) {
			return ev.Type != watch.Deleted && check(ev.Object), nil
		})
	require.NoError(t, err, "waiting for the Lease %s/%s", leaseNamespace, leaseName)
	return found
}
