package binary_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// A thousand pods on twenty nodes, all nodes tainted at once: every pod is
// evicted, none fails, the controller's pod writes stay within
// --kube-api-qps and --kube-api-burst and its event writes within the
// defaults of --events-qps and --events-burst, as the API server itself
// records them (its audit log, its apiserver_request_total), not as our
// client says; and the
// "Marking for deletion" events keep up with the deletions
// (markingEventsKeepUp).
func TestThousandPodsWithinQPS(t *testing.T) {
	const (
		ns    = "scale"
		nodes = 20
		pods  = 1000
		qps   = 50
		burst = 50
		// The events' budget: the flags' defaults.
		eventsQPS   = app.DefaultEventsQPS
		eventsBurst = app.DefaultEventsBurst
		// How much longer than the pod writes take at qps the deletions
		// may take (the machine is shared).
		slack = 1.25
		// The limiter admits at most burst + qps×T requests in any window
		// of T. The window is measured from the test's scrapes of the API
		// server's metrics, which bracket the controller's requests; 10 %
		// covers the timing of those scrapes.
		tolerance = 0.10
	)
	e := setup(t, ns, 5*time.Minute, nil)
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
	took := last.Sub(tainted)

	// No error: every eviction deleted its pod.
	p.waitMetric(ctx, "taintkit_evictions_total", map[string]string{"outcome": "deleted"}, eq(pods))
	for _, outcome := range []string{"failed", "gone", "terminating"} {
		assert.Equal(t, 0.0, p.metric(ctx, "taintkit_evictions_total", map[string]string{"outcome": outcome}), "outcome %s", outcome)
	}
	assert.Equal(t, 0.0, p.metric(ctx, "taintkit_timedqueue_failures_total", nil), "timed queue failures")
	assert.Equal(t, 0.0, p.metric(ctx, "taintkit_dispatcher_drops_total", nil), "dispatcher drops")
	assert.True(t, p.running(), "the controller kept running (and its lease)")

	// The controller's requests, as the API server has them: the
	// DisruptionTarget patches and the DELETEs, on one budget, from its
	// audit log (the oracle's record, which tells the controller's from the
	// kubelet stand-in's by User-Agent; it makes none outside the window);
	// the events, on another, from its own counters (only the controller
	// writes events).
	rep, err := e.oracle.Check()
	require.NoError(t, err)
	delta := func(verb, resource, subresource string) float64 {
		m := map[string]string{"verb": verb, "resource": resource, "subresource": subresource}
		b, _ := sum(before, "apiserver_request_total", m)
		a, _ := sum(after, "apiserver_request_total", m)
		return a - b
	}
	patches := float64(rep.Writes[oracle.PodStatus])
	deletes := float64(rep.Writes[oracle.PodDelete])
	events := delta("POST", "events", "") + delta("PATCH", "events", "")
	podWrites := patches + deletes
	t.Logf("MEASURED %d pods on %d nodes: last deletion %v after the taint; in %v: %.0f pod writes (%.0f status patches, %.0f deletes), %.1f/s with --kube-api-qps=%d --kube-api-burst=%d; %.0f event writes, %.1f/s with --events-qps=%d --events-burst=%d",
		pods, nodes, took.Round(time.Millisecond), window.Round(time.Millisecond), podWrites, patches, deletes, podWrites/window.Seconds(), qps, burst,
		events, events/window.Seconds(), eventsQPS, eventsBurst)
	assert.GreaterOrEqual(t, patches, float64(pods), "a DisruptionTarget patch per pod")
	assert.GreaterOrEqual(t, deletes, float64(pods), "a DELETE per pod by the controller")
	assert.LessOrEqual(t, podWrites, qps*window.Seconds()*(1+tolerance)+burst,
		"pod writes in %v: more than %d/s × (1 + %v) + a burst of %d", window, qps, tolerance, burst)
	assert.LessOrEqual(t, events, eventsQPS*window.Seconds()*(1+tolerance)+eventsBurst,
		"event writes in %v: more than %d/s × (1 + %v) + a burst of %d", window, eventsQPS, tolerance, eventsBurst)
	// The deletions as the audit log has them: when the server answered
	// each pod's DELETE.
	deleted := map[string]time.Time{}
	for _, ev := range rep.Evictions {
		deleted[ev.Name] = ev.Deleted
	}
	// The oracle's watch stops when Check is called, which may be a few
	// milliseconds before it has seen the last deletions the test's own
	// watch waited for: those few are left out of the share below, not
	// counted as late.
	require.GreaterOrEqual(t, len(deleted), pods*99/100, "deletions the oracle saw")
	markingEventsKeepUp(t, ctx, c, ns, deleted, last)
	// At qps the 2,000 pod writes take 40 s: the deletions cannot all have
	// happened much sooner, and events, on a budget of their own, must not
	// make them much later.
	assert.GreaterOrEqual(t, took.Seconds(), (2*pods-burst)/(qps*(1+tolerance)), "faster than the QPS allows")
	assert.LessOrEqual(t, took.Seconds(), 2*pods/qps*slack, "the deletions took more than %v× the time their writes take at %d/s", slack, qps)
}

// eventLagBound is how soon after its pod's deletion a "Marking for
// deletion" event must exist, for eventLagShare of the pods.
const (
	eventLagBound = 10 * time.Second
	eventLagShare = 0.95
)

// markingEventsKeepUp checks that the "Marking for deletion" events keep up
// with the deletions, both as the API server has them: for at least
// eventLagShare of the pods in deleted (pod name → when the server answered
// its DELETE, from the audit log), the event exists (its creationTimestamp)
// within eventLagBound of the deletion. The creationTimestamp has whole
// seconds: it is taken as the end of its second, so a lag is never
// understated. It waits until every event exists or eventLagBound has
// passed since last, the last deletion.
func markingEventsKeepUp(t *testing.T, ctx context.Context, c kubernetes.Interface, ns string, deleted map[string]time.Time, last time.Time) {
	t.Helper()
	const prefix = "Marking for deletion Pod "
	n := len(deleted)
	var marking map[string]time.Time // pod name → its event's creation, rounded up
	for {
		list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=TaintManagerEviction"})
		require.NoError(t, err)
		marking = map[string]time.Time{}
		for _, e := range list.Items {
			if name, ok := strings.CutPrefix(e.Message, prefix+ns+"/"); ok && e.InvolvedObject.Name == name {
				marking[name] = e.CreationTimestamp.Add(time.Second)
			}
		}
		if len(marking) >= n || time.Since(last) > eventLagBound+time.Second {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for the Marking for deletion events: %v", ctx.Err())
		case <-time.After(time.Second):
		}
	}
	var lags []time.Duration
	inTime := 0
	for name, at := range deleted {
		created, ok := marking[name]
		if !ok {
			continue
		}
		lag := max(created.Sub(at), 0)
		lags = append(lags, lag)
		if lag <= eventLagBound {
			inTime++
		}
	}
	slices.Sort(lags)
	pct := func(p float64) time.Duration {
		if len(lags) == 0 {
			return 0
		}
		return lags[min(len(lags)-1, int(p*float64(len(lags))))]
	}
	t.Logf("MEASURED Marking for deletion events: %d of %d pods have one within %v of their deletion, %d in all by %v after the last deletion; lag (event's creation second, rounded up, minus the DELETE's answer on the audit log) median %v, p95 %v, max %v",
		inTime, n, eventLagBound, len(marking), time.Since(last).Round(time.Second), pct(0.5), pct(0.95), pct(1))
	assert.GreaterOrEqual(t, float64(inTime), eventLagShare*float64(n),
		"fewer than %v of the pods have their Marking for deletion event within %v of their deletion", eventLagShare, eventLagBound)
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
