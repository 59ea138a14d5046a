package binary_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// A thousand pods on twenty nodes, all nodes tainted at once: every pod is
// evicted, none fails, and the controller's requests stay within
// --kube-api-qps and --kube-api-burst as the API server itself counts them
// (apiserver_request_total), not as our client says.
func TestThousandPodsWithinQPS(t *testing.T) {
	const (
		ns    = "scale"
		nodes = 20
		pods  = 1000
		qps   = 50
		burst = 50
		// The limiter admits at most burst + qps×T requests in any window
		// of T. The window is measured from the test's scrapes of the API
		// server's metrics, which bracket the controller's requests; 10 %
		// covers the timing of those scrapes.
		tolerance = 0.10
	)
	// The kubelet stand-in's DELETEs are counted once answered, to be told
	// from the controller's in the API server's counts. (Counted as sent, one
	// in flight when the server's counters were read made the controller's
	// look one short.)
	var finaliserDeletes atomic.Int64
	admin := testenv.Shared(t).AdminConfig()
	admin.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if req.Method == http.MethodDelete {
				finaliserDeletes.Add(1)
			}
			return resp, err
		})
	})
	finaliser, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	e := setup(t, ns, 5*time.Minute, finaliser)
	ctx, c := e.ctx, e.c

	// The pods, by the administrator, fast: a pod per node in turn, with a
	// toleration that does not match the taint to come.
	nodeName := func(i int) string { return fmt.Sprintf("scale-node-%02d", i%nodes) }
	for i := range nodes {
		_, err := testenv.CreateNode(ctx, c, nodeName(i))
		require.NoError(t, err)
	}
	other := corev1.Toleration{Key: "example.com/other", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	require.NoError(t, parallel(ctx, pods, 16, func(ctx context.Context, i int) error {
		_, err := testenv.CreatePodOnNode(ctx, c, testenv.NewPod(ns, "pod-"+strconv.Itoa(i), other), nodeName(i))
		return err
	}))

	// The controller starts with the pods in place; without -v its logs
	// stay small.
	p := startController(t, e, "controller",
		"--leader-elect=true", "--kube-api-qps="+strconv.Itoa(qps), "--kube-api-burst="+strconv.Itoa(burst))
	waitForLease(t, ctx, c, func(l *leaseState) bool { return l.holder == p.Identity() })
	p.waitMetric(ctx, "taintkit_leader", nil, eq(1))
	require.Equal(t, 0.0, p.metric(ctx, "taintkit_evictions_pending", nil), "nothing due before the taint")

	// Every deletion the controller makes, as a watch sees it: a pod
	// terminating (or gone).
	evicted, gone := watchEvictions(t, ctx, c, ns, pods)

	before := apiserverMetrics(t, ctx, c)
	finaliserBefore := finaliserDeletes.Load()
	windowStart := time.Now()
	taint := testenv.NoExecuteTaint("example.com/scale", "true")
	tainted := time.Now()
	require.NoError(t, parallel(ctx, nodes, nodes, func(ctx context.Context, i int) error {
		_, err := testenv.TaintNode(ctx, c, nodeName(i), taint)
		return err
	}))
	// Two requests a pod at qps: not every pod can go within 2 s of its
	// deadline. The oracle allows the backlog as long as the rate needs.
	backlogRate := qps * (1 - tolerance) // a variable: as a constant the Duration would be a float
	backlog := time.Duration(float64(2*pods) / backlogRate * float64(time.Second))
	e.oracle.Fault(fmt.Sprintf("a backlog of %d evictions at --kube-api-qps=%d", pods, qps), tainted, tainted.Add(backlog))

	var last time.Time
	select {
	case last = <-evicted:
	case <-ctx.Done():
		t.Fatalf("not all %d pods deleted: %v", pods, ctx.Err())
	}
	// The kubelet stand-in deletes every pod once more (grace period 0);
	// the window ends when it has, so that its DELETEs, one per pod, can be
	// told from the controller's.
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatalf("not all %d pods gone: %v", pods, ctx.Err())
	}
	after := apiserverMetrics(t, ctx, c)
	window := time.Since(windowStart)
	finalised := float64(finaliserDeletes.Load() - finaliserBefore)
	took := last.Sub(tainted)

	// No error: every eviction deleted its pod.
	p.waitMetric(ctx, "taintkit_evictions_total", map[string]string{"outcome": "deleted"}, eq(pods))
	for _, outcome := range []string{"failed", "gone", "terminating"} {
		assert.Equal(t, 0.0, p.metric(ctx, "taintkit_evictions_total", map[string]string{"outcome": outcome}), "outcome %s", outcome)
	}
	assert.Equal(t, 0.0, p.metric(ctx, "taintkit_timedqueue_failures_total", nil), "timed queue failures")
	assert.Equal(t, 0.0, p.metric(ctx, "taintkit_dispatcher_drops_total", nil), "dispatcher drops")
	assert.True(t, p.running(), "the controller kept running (and its lease)")

	// The controller's requests, from the API server's own counters: the
	// DisruptionTarget patches, the DELETEs and the events. The controller
	// is impersonated, so it is told apart by verb and resource; the
	// kubelet stand-in's DELETEs are taken off.
	delta := func(verb, resource, subresource string) float64 {
		m := map[string]string{"verb": verb, "resource": resource, "subresource": subresource}
		b, _ := sum(before, "apiserver_request_total", m)
		a, _ := sum(after, "apiserver_request_total", m)
		return a - b
	}
	patches := delta("PATCH", "pods", "status")
	deletes := delta("DELETE", "pods", "") - finalised
	events := delta("POST", "events", "") + delta("PATCH", "events", "")
	total := patches + deletes + events
	rate := total / window.Seconds()
	bound := qps*window.Seconds()*(1+tolerance) + burst
	t.Logf("MEASURED %d pods on %d nodes: last deletion %v after the taint; %v requests in %v (%.0f status patches, %.0f deletes, %.0f events): %.1f requests/s with --kube-api-qps=%d --kube-api-burst=%d",
		pods, nodes, took.Round(time.Millisecond), total, window.Round(time.Millisecond), patches, deletes, events, rate, qps, burst)
	// Per pod, from the audit log, which tells the controller's requests by
	// their User-Agent: the counters' difference can miss a DELETE of the
	// kubelet stand-in's whose answer it had before the server counted it.
	rep, err := e.oracle.Check()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rep.Writes[oracle.PodStatus], pods, "a DisruptionTarget patch per pod (audit log)")
	assert.GreaterOrEqual(t, rep.Writes[oracle.PodDelete], pods, "a DELETE per pod by the controller (audit log)")
	assert.LessOrEqual(t, total, bound, "requests in %v: more than %d/s × (1 + %v) + a burst of %d", window, qps, tolerance, burst)
	// Events are best effort: client-go's broadcaster drops what its queue
	// cannot hold while the limiter holds the sink back.
	recorded, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=TaintManagerEviction"})
	require.NoError(t, err)
	t.Logf("MEASURED %d TaintManagerEviction events recorded in %s by the end of the test", len(recorded.Items), ns)
	// At qps the ~3,000 requests take a minute: the deletions cannot all
	// have happened much sooner.
	assert.GreaterOrEqual(t, took.Seconds(), (2*pods-burst)/(qps*(1+tolerance)), "faster than the QPS allows")
}

// watchEvictions watches the pods in namespace. Once all n have been seen
// terminating (the controller's DELETE) or deleted, it sends the time of the
// last on evicted; once all n are gone (the kubelet stand-in's DELETE), it
// sends the time on gone.
func watchEvictions(t *testing.T, ctx context.Context, c kubernetes.Interface, namespace string, n int) (evicted, gone <-chan time.Time) {
	t.Helper()
	evictedC, goneC := make(chan time.Time, 1), make(chan time.Time, 1)
	var mu sync.Mutex
	terminating, deleted := map[types.UID]bool{}, map[types.UID]bool{}
	mark := func(obj any, isDelete bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok || (!isDelete && pod.DeletionTimestamp == nil) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !terminating[pod.UID] {
			terminating[pod.UID] = true
			if len(terminating) == n {
				evictedC <- time.Now()
			}
		}
		if isDelete && !deleted[pod.UID] {
			deleted[pod.UID] = true
			if len(deleted) == n {
				goneC <- time.Now()
			}
		}
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", namespace, fields.Everything()),
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) { mark(obj, false) },
			DeleteFunc: func(obj any) { mark(obj, true) },
		},
	})
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		informer.RunWithContext(runCtx)
	}()
	t.Cleanup(func() {
		stop()
		<-stopped
	})
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced), "pod watch not synced")
	return evictedC, goneC
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(context.Context, int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				err := retry.OnError(retry.DefaultBackoff, apierrors.IsTooManyRequests, func() error { return f(ctx, i) })
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
