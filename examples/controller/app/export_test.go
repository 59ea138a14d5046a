package app

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/taintkit/taintkit/examples/controller/internal/devicetaints"
	"github.com/taintkit/taintkit/tolerations"
)

// RunWithClients is Run on given clientsets: client for the informers, the
// pod writes and the events, leaderClient for the lease.
func RunWithClients(ctx context.Context, client, leaderClient kubernetes.Interface, o Options) error {
	return run(ctx, clients{api: client, leader: leaderClient, events: client}, o)
}

// RunWithEventsClient is RunWithClients with the events on a clientset of
// their own, as Run has them.
func RunWithEventsClient(ctx context.Context, client, leaderClient, eventsClient kubernetes.Interface, o Options) error {
	return run(ctx, clients{api: client, leader: leaderClient, events: eventsClient}, o)
}

// RunWithMetricsFilter is RunWithClients with filter in front of the
// metrics server, where Run puts metricsauth's authenticating one.
func RunWithMetricsFilter(ctx context.Context, client kubernetes.Interface, filter MetricsFilter, o Options) error {
	return run(ctx, clients{api: client, leader: client, events: client, metricsFilter: filter}, o)
}

// Internals for the black-box tests of package app_test.
var (
	NodeHandler = nodeHandler
	PodHandler  = podHandler
	Trim        = trim
)

// PodDevices is what the controller gives the manager as pod's devices
// (Config.Devices) when its informers hold objs: ResourceClaims,
// ResourceSlices and DeviceTaintRules.
func PodDevices(pod *v1.Pod, objs ...runtime.Object) []tolerations.Device {
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	x := &devices{claimLister: resourcelisters.NewResourceClaimLister(claims), taints: devicetaints.New()}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *resourcev1.ResourceClaim:
			if err := claims.Add(o); err != nil {
				panic(err)
			}
		case *resourcev1.ResourceSlice:
			x.taints.ObserveSlice(o)
		case *resourcev1.DeviceTaintRule:
			x.taints.ObserveRule(o)
		}
	}
	return x.podDevices(pod)
}
