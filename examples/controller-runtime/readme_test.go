package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/taintkit/taintkit/examples/controller-runtime/expiry"
	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
	"github.com/taintkit/taintkit/examples/controller-runtime/noexecute"
	"github.com/taintkit/taintkit/examples/controller/metricsauth"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// examples/README.md's "Using it with controller-runtime" quotes the body of
// runControllers verbatim; the root package's TestReadmeCodeIsTested fails
// if they drift apart, and TestReadmeRunControllers runs it.

func runControllers(ctx context.Context, cfg *rest.Config, metricsAddr, probeAddr string) error {
	opts := ctrl.Options{
		Metrics: metricsserver.Options{
			BindAddress:   metricsAddr,
			SecureServing: true,
			// 401 for a token the API server rejects; 500 only when it
			// cannot be asked.
			FilterProvider: metricsauth.NewAs[metricsserver.Filter],
		},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          true,
		LeaderElectionID:        "taintkit-controllers",
		LeaderElectionNamespace: "kube-system",
		// Stepping down on cancel is safe: the Runnable's Start returns only
		// once its evictions in flight have, and the fence's Lease lock
		// never releases a Lease another replica has taken.
		LeaderElectionReleaseOnCancel: true,
	}
	// Pod and event writes leave only while the last renewal of the Lease
	// is younger than the renew deadline, checked in the transport.
	fence, err := noexecute.NewLeaderFence(cfg, &opts)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(fence.Config, opts)
	if err != nil {
		return err
	}
	if err := mgr.Add(fence); err != nil {
		return err
	}
	// The NoExecute taint manager: a Runnable that acts only while mgr leads,
	// fed by mgr's cache, its metrics on mgr's metrics server.
	taints := &noexecute.Runnable{Config: manager.Config{MaxConcurrentEvictions: 16}}
	if err := taints.SetupWithManager(mgr); err != nil {
		return err
	}
	// A reconciler keeping one timed schedule per ConfigMap: deleted when
	// its taintkit.example/expire-at annotation says.
	if err := (&expiry.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// runControllers, as the README shows it, against envtest's API server:
// an untolerated pod and an expired ConfigMap are deleted, and it returns
// nil once its context is cancelled.
func TestReadmeRunControllers(t *testing.T) {
	cfg := testenv.Config(t)
	c, err := client.NewWithWatch(cfg, client.Options{})
	require.NoError(t, err)
	if readmeRan.Swap(true) {
		t.Skip("runControllers registers names once per process (its controller's, its metrics in " +
			"controller-runtime's registry): go test -count runs it once")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The waits below end early if runControllers returns.
	wait, stopWaiting := context.WithTimeout(ctx, time.Minute)
	defer stopWaiting()
	done := make(chan error, 1)
	go func() {
		done <- runControllers(ctx, cfg, freeAddr(t), freeAddr(t))
		stopWaiting()
	}()

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("readme-node")}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: "example.com/broken", Effect: v1.TaintEffectNoExecute}}}}
	require.NoError(t, c.Create(ctx, node))
	t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: testenv.Name("readme-web")},
		Spec: v1.PodSpec{NodeName: node.Name, Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	require.NoError(t, c.Create(ctx, pod))
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: testenv.Name("readme-expired"),
		Annotations: map[string]string{expiry.Annotation: time.Now().UTC().Format(time.RFC3339)}}}
	require.NoError(t, c.Create(ctx, cm))

	require.NoError(t, testenv.WaitDeleted(wait, c, &v1.PodList{}, pod), "the pod was not deleted; %s", returned(done))
	require.NoError(t, testenv.WaitDeleted(wait, c, &v1.ConfigMapList{}, cm), "the ConfigMap was not deleted; %s", returned(done))
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("runControllers did not return within a minute of its context's end")
	}
}

var readmeRan atomic.Bool

// returned says whether runControllers has returned, and what.
func returned(done chan error) string {
	select {
	case err := <-done:
		done <- err
		return fmt.Sprintf("runControllers returned %v", err)
	default:
		return "runControllers runs"
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
