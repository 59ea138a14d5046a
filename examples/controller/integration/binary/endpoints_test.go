package binary_test

import (
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// What a deployment sees of the binary: started with --kubeconfig it turns
// ready, leads, shows its queue and its evictions on /metrics, and on
// SIGTERM exits 0 having released the lease for the next replica.
func TestBinaryEndpointsAndShutdown(t *testing.T) {
	const ns = "binary"
	e := setup(t, ns, 2*time.Minute, nil)
	ctx, c := e.ctx, e.c

	taint := testenv.NoExecuteTaint("example.com/binary", "true")
	node, err := testenv.CreateNode(ctx, c, "binary-node", taint)
	require.NoError(t, err)

	begin := time.Now()
	p := launchController(t, e, "controller", append(leaderFlags, "-v=2")...)
	listening := time.Since(begin)

	// Ready once its caches are synced. A process offers nothing to watch:
	// /readyz is asked every 50 ms until ctx's deadline.
	notReady := 0
	for {
		code, _, err := httpGet(ctx, p.healthURL("/readyz"))
		if err == nil && code == http.StatusOK {
			break
		}
		if err == nil && code == http.StatusServiceUnavailable {
			notReady++
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz not 200 (last: %d, %v): %v", code, err, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
	t.Logf("MEASURED readiness: /readyz 200 %v after the process started (servers listening after %v; %d answers 503 before)",
		time.Since(begin).Round(time.Millisecond), listening.Round(time.Millisecond), notReady)
	code, body, err := httpGet(ctx, p.healthURL("/healthz"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "/healthz: %s", body)

	lease := waitForLease(t, ctx, c, func(l *leaseState) bool { return l.holder == p.Identity() })
	t.Logf("%s leads since %v", p.Identity(), lease.acquired)
	p.waitMetric(ctx, "taintkit_leader", nil, eq(1))

	// The queue's depth: a pod that tolerates the taint for 300 s waits in
	// the queue.
	waiting, err := testenv.CreateBoundPod(ctx, c, testenv.NewPod(ns, "tolerates", corev1.Toleration{
		Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
		TolerationSeconds: ptr.To[int64](300),
	}), node.Name)
	require.NoError(t, err)
	p.waitMetric(ctx, "taintkit_evictions_pending", nil, eq(1))

	// /debug/evictions shows its countdown: the taint and the deadline,
	// the later of the stored TimeAdded and PodScheduled (whole seconds)
	// + 300 s.
	code, body, err = httpGetAs(ctx, "https://"+p.metricsAddr+"/debug/evictions", p.token)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	var pending []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &pending), body)
	require.Len(t, pending, 1, body)
	start := node.Spec.Taints[0].TimeAdded.Time
	for _, c := range waiting.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.LastTransitionTime.After(start) {
			start = c.LastTransitionTime.Time
		}
	}
	assert.Equal(t, map[string]any{
		"namespace": ns, "name": waiting.Name, "uid": string(waiting.UID), "node": node.Name,
		"taint":    "example.com/binary=true:NoExecute",
		"deadline": start.Add(300 * time.Second).UTC().Format(time.RFC3339),
		"attempts": 0.0, "lastError": "", "failed": false,
	}, pending[0])

	// An eviction: a pod that does not tolerate the taint.
	doomed, err := testenv.CreateBoundPod(ctx, c, testenv.NewPod(ns, "doomed"), node.Name)
	require.NoError(t, err)
	_, err = testenv.WaitForPodDeleted(ctx, c, ns, doomed.Name, doomed.UID)
	require.NoError(t, err)
	// The counter moves when the DELETE has returned, which may be a moment
	// after the kubelet stand-in saw the pod terminating.
	p.waitMetric(ctx, "taintkit_evictions_total", map[string]string{"outcome": "deleted"}, eq(1))
	assert.Equal(t, 0.0, p.metric(ctx, "taintkit_evictions_total", map[string]string{"outcome": "failed"}))
	assert.Equal(t, 1.0, p.metric(ctx, "taintkit_evictions_pending", nil), "the tolerating pod still waits")
	assert.Equal(t, 1.0, p.metric(ctx, "taintkit_timedqueue_pending", map[string]string{"queue": "noexecute-evictions"}))

	// SIGTERM: exit 0, the lease released as client-go's ReleaseOnCancel
	// writes it (no holder, a lease of 1 s), the waiting pod left alone.
	p.signal(syscall.SIGTERM)
	exitCtx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	assert.Equal(t, 0, p.wait(exitCtx), "exit code after SIGTERM")
	released, err := c.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, ptr.Deref(released.Spec.HolderIdentity, ""), "holderIdentity after the release")
	assert.Equal(t, int32(1), ptr.Deref(released.Spec.LeaseDurationSeconds, 0), "leaseDurationSeconds after the release")
	still, err := c.CoreV1().Pods(ns).Get(ctx, waiting.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, still.DeletionTimestamp, "the tolerating pod was not evicted by the shutdown")
}
