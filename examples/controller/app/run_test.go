package app_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

// These tests run the whole controller on a fake clientset inside a
// synctest bubble. The controller runs on the real clock (it has no clock
// option), which in a bubble is the bubble's fake clock: time.Sleep in the
// test moves it, and synctest.Wait settles every goroutine afterwards.

const unreachable = "node.kubernetes.io/unreachable"

// taintedNode returns a node with a NoExecute taint added at addedAt.
func taintedNode(name string, addedAt time.Time) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{
			Key: unreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(addedAt)),
		}}},
	}
}

// boundPod returns a pod on node, scheduled at boundAt, tolerating the
// unreachable taint for tolerate (nil: not at all; negative: forever).
func boundPod(name string, uid types.UID, node string, boundAt time.Time, tolerate *time.Duration) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
		Spec:       v1.PodSpec{NodeName: node},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(boundAt),
		}}},
	}
	if tolerate != nil {
		tol := v1.Toleration{Key: unreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
		if *tolerate >= 0 {
			tol.TolerationSeconds = ptr.To(int64(*tolerate / time.Second))
		}
		pod.Spec.Tolerations = []v1.Toleration{tol}
	}
	return pod
}

func testOptions() app.Options {
	o := app.NewOptions()
	o.LeaderElect = false
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.Registry = prometheus.NewRegistry()
	return o
}

// leaderOptions returns options for a replica with short lease times.
func leaderOptions(identity string) app.Options {
	o := testOptions()
	o.LeaderElect = true
	o.Identity = identity
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, time.Second
	return o
}

type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, once done is closed
}

// start runs the controller on client in the background; the test's end
// stops it if the test did not.
func start(t *testing.T, client kubernetes.Interface, o app.Options) *running {
	return startFiltered(t, client, nil, o)
}

// startFiltered is start with filter in front of the metrics server.
func startFiltered(t *testing.T, client kubernetes.Interface, filter app.MetricsFilter, o app.Options) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = app.RunWithMetricsFilter(ctx, client, filter, o)
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels the run and returns Run's result.
func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

// wait returns Run's result once it returned.
func (r *running) wait() error {
	<-r.done
	return r.err
}

func podExists(t *testing.T, client kubernetes.Interface, name string) bool {
	t.Helper()
	_, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func events(t *testing.T, client kubernetes.Interface, pod string) []string {
	t.Helper()
	list, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var msgs []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod {
			assert.Equal(t, "TaintManagerEviction", e.Reason)
			assert.Equal(t, app.Component, e.Source.Component)
			msgs = append(msgs, e.Message)
		}
	}
	return msgs
}

func TestRunEvictsUntoleratedPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		client := newFakeAPI(
			taintedNode("node-1", now),
			&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}},
			boundPod("web", "uid-web", "node-1", now, nil),
			boundPod("agent", "uid-agent", "node-1", now, ptr.To(time.Duration(-1))),
			boundPod("db", "uid-db", "node-2", now, nil),
		)
		o := testOptions()
		r := start(t, client, o)
		synctest.Wait()

		assert.False(t, podExists(t, client, "web"), "untolerated pod deleted")
		assert.True(t, podExists(t, client, "agent"), "pod tolerating forever kept")
		assert.True(t, podExists(t, client, "db"), "pod on an untainted node kept")

		// The pod's status said why before it went, and the delete named
		// the pod's UID.
		var writes []string
		for _, a := range client.Actions() {
			if a.GetResource().Resource != "pods" {
				continue
			}
			switch a := a.(type) {
			case clienttesting.PatchAction:
				writes = append(writes, "patch "+a.GetName()+" "+a.GetSubresource())
				assert.Contains(t, string(a.GetPatch()), `"reason":"DeletionByTaintManager"`)
				assert.Contains(t, string(a.GetPatch()), `"uid":"uid-web"`)
			case clienttesting.DeleteAction:
				writes = append(writes, "delete "+a.GetName())
				assert.Equal(t, types.UID("uid-web"), *a.GetDeleteOptions().Preconditions.UID)
			}
		}
		// (The manager may set the condition once more, on the pod it
		// still sees in its cache for an instant, and learn it is gone.)
		require.GreaterOrEqual(t, len(writes), 2)
		assert.Equal(t, []string{"patch web status", "delete web"}, writes[:2])
		assert.NotContains(t, writes[2:], "delete web")
		assert.ElementsMatch(t, []string{
			"Scheduled for deletion at " + now.UTC().Format(time.RFC3339Nano) + ": taint " + unreachable + ":NoExecute not tolerated",
			"Marking for deletion Pod default/web",
		}, events(t, client, "web"))

		kubetest.RequireValue(t, o.Registry, 1, kube.MetricEvictions, "outcome", "deleted")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricEvictions, "outcome", "evicted")
		kubetest.RequireValue(t, o.Registry, 1, kube.MetricLeader)
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricEvictionsPending)
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricDispatcherDepth, "dispatcher", "noexecute-updates", "lane", "low")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricDispatcherDepth, "dispatcher", "noexecute-updates", "lane", "high")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricQueuePending, "queue", "noexecute-evictions")
		got, ok := kubetest.MetricValue(t, o.Registry, kube.MetricQueueAdds, "queue", "noexecute-evictions")
		assert.True(t, ok && got >= 1, "adds %v", got)

		assert.NoError(t, r.stop())
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricLeader)
	})
}

// Events go through a client of their own (Run gives it the events'
// budget, --events-qps): the manager's and the leader election's, none
// through the client of the pod writes.
func TestRunRecordsEventsOnTheirOwnClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		client := newFakeAPI(taintedNode("node-1", now), boundPod("web", "uid-web", "node-1", now, nil))
		eventsClient := newFakeAPI()
		o := leaderOptions("replica-a")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.RunWithEventsClient(ctx, client, client, eventsClient, o) }()
		synctest.Wait()
		assert.False(t, podExists(t, client, "web"), "untolerated pod deleted")
		cancel()
		require.NoError(t, <-done)

		assert.ElementsMatch(t, []string{
			"Scheduled for deletion at " + now.UTC().Format(time.RFC3339Nano) + ": taint " + unreachable + ":NoExecute not tolerated",
			"Marking for deletion Pod default/web",
		}, events(t, eventsClient, "web"))
		leases, err := eventsClient.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		assert.NotEmpty(t, leases.Items, "the leader election's events")
		for _, a := range client.Actions() {
			assert.NotEqual(t, "events", a.GetResource().Resource, "an event written with the pods' client: %v", a)
		}
	})
}

func TestRunEvictsWhenTolerationRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		client := newFakeAPI(
			taintedNode("node-1", t0),
			boundPod("web", "uid-web", "node-1", t0, ptr.To(5*time.Second)),
		)
		start(t, client, testOptions())
		synctest.Wait()

		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		assert.True(t, podExists(t, client, "web"), "deleted before its toleration ran out")

		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.False(t, podExists(t, client, "web"), "not deleted when its toleration ran out")
	})
}

func TestRunCancelsWhenTaintRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		node := taintedNode("node-1", t0)
		client := newFakeAPI(node, boundPod("web", "uid-web", "node-1", t0, ptr.To(10*time.Second)))
		start(t, client, testOptions())
		synctest.Wait()

		time.Sleep(3 * time.Second)
		node.Spec.Taints = nil
		_, err := client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{})
		require.NoError(t, err)
		synctest.Wait()

		time.Sleep(time.Minute)
		synctest.Wait()
		assert.True(t, podExists(t, client, "web"))
		assert.ElementsMatch(t, []string{
			"Scheduled for deletion at " + t0.Add(10*time.Second).UTC().Format(time.RFC3339Nano) + ": taint " + unreachable + ":NoExecute not tolerated after 10 s",
			"Cancelling deletion of Pod default/web",
		}, events(t, client, "web"))
	})
}

// A pod deleted and recreated under the same name during its countdown
// is decided afresh: the new one tolerates the taint and stays.
func TestRunRecreatedPodDecidedAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		client := newFakeAPI(taintedNode("node-1", t0), boundPod("web", "uid-1", "node-1", t0, ptr.To(10*time.Second)))
		start(t, client, testOptions())
		synctest.Wait()

		time.Sleep(5 * time.Second)
		require.NoError(t, client.CoreV1().Pods("default").Delete(context.Background(), "web", metav1.DeleteOptions{}))
		_, err := client.CoreV1().Pods("default").Create(context.Background(),
			boundPod("web", "uid-2", "node-1", time.Now(), ptr.To(time.Duration(-1))), metav1.CreateOptions{})
		require.NoError(t, err)
		synctest.Wait()

		time.Sleep(time.Minute)
		synctest.Wait()
		assert.True(t, podExists(t, client, "web"), "the new pod was deleted for the old one")
	})
}

// In-flight deletions finish after ctx is done, within the grace period.
func TestRunShutdownLetsInFlightDeletionFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newFakeAPI(taintedNode("node-1", time.Now()), boundPod("web", "uid-web", "node-1", time.Now(), nil))
		entered, proceed := make(chan context.Context, 1), make(chan struct{})
		o := testOptions()
		o.BeforeDelete = func(ctx context.Context, _ *v1.Pod) {
			entered <- ctx
			<-proceed
		}
		r := start(t, client, o)
		synctest.Wait()
		reqCtx := <-entered

		r.cancel()
		synctest.Wait()
		select {
		case <-r.done:
			t.Fatalf("Run returned %v with a deletion in flight", r.err)
		default:
		}
		assert.NoError(t, reqCtx.Err(), "the deletion in flight was cancelled at once")

		time.Sleep(o.ShutdownGracePeriod / 2)
		close(proceed)
		assert.NoError(t, r.wait())
		assert.False(t, podExists(t, client, "web"), "the deletion in flight was not completed")
	})
}

// Requests still in flight when the grace period ends are cancelled, and
// Run returns then.
func TestRunShutdownGracePeriodEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newFakeAPI(taintedNode("node-1", time.Now()), boundPod("web", "uid-web", "node-1", time.Now(), nil))
		cause := make(chan error, 1)
		o := testOptions()
		o.ShutdownGracePeriod = 3 * time.Second
		o.BeforeDelete = func(ctx context.Context, _ *v1.Pod) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
		}
		r := start(t, client, o)
		synctest.Wait()

		stopped := time.Now()
		assert.NoError(t, r.stop())
		assert.Equal(t, 3*time.Second, time.Since(stopped))
		assert.ErrorContains(t, <-cause, "shutdown grace period expired")
	})
}

// startPair starts replica-a, then replica-b, with leader election, and
// requires replica-a to lead. It runs in a synctest bubble.
func startPair(t *testing.T, client kubernetes.Interface) (a, b *running, oa, ob app.Options) {
	t.Helper()
	oa, ob = leaderOptions("replica-a"), leaderOptions("replica-b")
	a = start(t, client, oa)
	synctest.Wait()
	b = start(t, client, ob)
	synctest.Wait()
	require.Equal(t, "replica-a", *lease(t, client).Spec.HolderIdentity)
	return a, b, oa, ob
}

// waitTakeover waits out a retry period of o, jittered by up to
// JitterFactor more (2 s was not enough: the jitter can take it to 2.2 s),
// and requires o's replica to lead then. It runs in a synctest bubble.
func waitTakeover(t *testing.T, client kubernetes.Interface, o app.Options) {
	t.Helper()
	time.Sleep(time.Duration(float64(o.RetryPeriod) * (1 + leaderelection.JitterFactor)))
	synctest.Wait()
	require.Equal(t, o.Identity, *lease(t, client).Spec.HolderIdentity)
}

// assertDeletedAt checks that the pod name is still there a millisecond
// before deadline and gone at it; what says which deadline that is. It
// runs in a synctest bubble.
func assertDeletedAt(t *testing.T, client kubernetes.Interface, name string, deadline time.Time, what string) {
	t.Helper()
	time.Sleep(time.Until(deadline) - time.Millisecond)
	synctest.Wait()
	assert.True(t, podExists(t, client, name), "deleted before %s (%s)", what, deadline)
	time.Sleep(time.Millisecond)
	synctest.Wait()
	assert.False(t, podExists(t, client, name), "not deleted at %s (%s)", what, deadline)
}

func lease(t *testing.T, client kubernetes.Interface) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "taintkit-noexecute", metav1.GetOptions{})
	require.NoError(t, err)
	return l
}

// Two replicas: one leads; when it shuts down it releases the lease, and
// the other takes over and evicts at the deadline the first one computed.
func TestRunLeaderElectionHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		client := newFakeAPI(taintedNode("node-1", t0), boundPod("web", "uid-web", "node-1", t0, ptr.To(10*time.Second)))
		a, b, oa, ob := startPair(t, client)
		kubetest.RequireValue(t, oa.Registry, 1, kube.MetricLeader)
		kubetest.RequireValue(t, oa.Registry, 1, kube.MetricEvictionsPending)
		kubetest.RequireValue(t, ob.Registry, 0, kube.MetricLeader)

		time.Sleep(4 * time.Second)
		assert.NoError(t, a.stop())
		assert.Empty(t, *lease(t, client).Spec.HolderIdentity, "lease released")

		waitTakeover(t, client, ob)
		kubetest.RequireValue(t, ob.Registry, 1, kube.MetricLeader)
		kubetest.RequireValue(t, ob.Registry, 1, kube.MetricEvictionsPending)

		assertDeletedAt(t, client, "web", t0.Add(10*time.Second), "the original deadline")
		assert.NoError(t, b.stop())
	})
}

// A leader that cannot renew its lease (the API server is unreachable
// for it) stops acting at once: requests in flight are cancelled and Run
// returns ErrLeaderLost, within the renew deadline.
func TestRunLeaderLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newFakeAPI(taintedNode("node-1", time.Now()), boundPod("web", "uid-web", "node-1", time.Now(), nil))
		var partitioned atomic.Bool
		client.PrependReactor("*", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
			if partitioned.Load() {
				return true, nil, errors.New("dial tcp: connect: connection refused")
			}
			return false, nil, nil
		})
		cause := make(chan error, 1)
		o := leaderOptions("replica-a")
		o.BeforeDelete = func(ctx context.Context, _ *v1.Pod) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
		}
		r := start(t, client, o)
		synctest.Wait()
		require.Equal(t, "replica-a", *lease(t, client).Spec.HolderIdentity)

		partitioned.Store(true)
		cut := time.Now()
		assert.ErrorIs(t, r.wait(), app.ErrLeaderLost)
		// The last renewal was at most a retry period before the cut; the
		// elector gives up a renew deadline after it.
		assert.LessOrEqual(t, time.Since(cut), o.RetryPeriod+o.RenewDeadline)
		assert.ErrorIs(t, <-cause, app.ErrLeaderLost, "the deletion in flight was not cancelled")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricLeader)
	})
}

// A replica told to stop before it acquired the lease returns nil and
// never ran a manager.
func TestRunStopWhileStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newFakeAPI(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "taintkit-noexecute"},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("other"),
				LeaseDurationSeconds: ptr.To(int32(3600)),
				RenewTime:            ptr.To(metav1.NewMicroTime(time.Now())),
			},
		})
		o := leaderOptions("replica-a")
		r := start(t, client, o)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricLeader)
		assert.NoError(t, r.stop())
		assert.Equal(t, "other", *lease(t, client).Spec.HolderIdentity)
	})
}

func TestRunRejectsInvalidOptions(t *testing.T) {
	o := testOptions()
	o.Shards = 0
	client := fake.NewClientset()
	err := app.RunWithClients(t.Context(), client, client, o)
	assert.ErrorContains(t, err, "--shards must be at least 1")
	assert.Empty(t, client.Actions(), "nothing started")

	err = app.Run(t.Context(), nil, o)
	assert.ErrorContains(t, err, "--shards must be at least 1")
}

// A busy address fails Run before anything starts.
func TestRunBusyAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	o := testOptions()
	o.HealthProbeBindAddress = l.Addr().String()
	client := fake.NewClientset()
	err = app.RunWithClients(t.Context(), client, client, o)
	assert.ErrorContains(t, err, "health probe server")
	assert.Empty(t, client.Actions(), "nothing started")
}
