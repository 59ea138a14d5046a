package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/examples/internal/kube"
)

// Scenario 4, first half. A pod deleted and recreated under the same name
// during its countdown is another pod: its own countdown starts when it is
// bound, and the first pod's deadline passes without deleting it. Both
// pods tolerate the taint for 5 s; the second is bound at least 2 s after
// the first, so its DELETE must come no earlier than its own start + 5 s
// (which is after the first pod's deadline) and it is gone by + 7 s.
func TestRecreatedPodDecidedAfresh(t *testing.T) {
	h := setup(t, "it-recreated")
	ctrl := h.startController(true, nil)
	const key = "example.com/maintenance"
	tolerate5s := corev1.Toleration{
		Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(5 * time.Second),
	}
	nodeName := h.node("node", testenv.NoExecuteTaint(key, "true"))
	node, err := h.c.CoreV1().Nodes().Get(h.ctx, nodeName, metav1.GetOptions{})
	require.NoError(t, err)

	first, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "web", tolerate5s), nodeName)
	require.NoError(t, err)
	w1 := h.watchPod(first)
	start1 := countdownStart(t, node, key, first)
	// The controller starts the first pod's countdown meanwhile; its
	// deadline is at least 4 s away.
	w1.stays(t, time.Now().Add(2*time.Second))
	require.NoError(t, h.c.CoreV1().Pods(h.ns).Delete(h.ctx, first.Name, metav1.DeleteOptions{}))
	w1.waitDeleted(t, 10*time.Second)

	second, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "web", tolerate5s), nodeName)
	require.NoError(t, err)
	require.NotEqual(t, first.UID, second.UID)
	w2 := h.watchPod(second)
	start2 := countdownStart(t, node, key, second)
	require.False(t, start2.Before(start1.Add(2*time.Second)), "the second pod's countdown starts %s after the first's", start2.Sub(start1))

	gone := w2.waitDeleted(t, time.Until(start2.Add(20*time.Second)))
	deleting, ok := ctrl.deleteCalled(second.UID)
	require.True(t, ok, "the second pod was deleted, but not by the controller")
	t.Logf("scenario 4a: first pod's deadline %s; second pod's start %s, DELETE %s and deletion seen %s after it",
		start1.Add(5*time.Second).Format(time.RFC3339), start2.Format(time.RFC3339), ms(deleting.Sub(start2)), ms(gone.Sub(start2)))
	assert.False(t, deleting.Before(start2.Add(5*time.Second)), "second pod's DELETE %s after its own start, before 5 s (the first pod's deadline was %s after it)",
		ms(deleting.Sub(start2)), ms(start1.Add(5*time.Second).Sub(start2)))
	assert.LessOrEqual(t, gone.Sub(start2), 7*time.Second)
	_, called := ctrl.deleteCalled(first.UID)
	assert.False(t, called, "the controller tried to delete the first pod, which the test deleted")
	for _, e := range h.events("web", "Marking for deletion") {
		assert.Equal(t, second.UID, e.InvolvedObject.UID, "Marking for deletion event about the first pod")
	}
}

// Scenario 4, second half: the UID precondition against the real API
// server. Options.BeforeDelete replaces the pod (same name, new UID) after
// the controller's last read and before its DELETE. The server refuses the
// DELETE with 409 Conflict (seen by the controller's client and counted in
// the server's own apiserver_request_total), and the new pod, which
// tolerates the taint for an hour, is decided afresh: it stays, without a
// DisruptionTarget condition or a Marking for deletion event, with its own
// countdown pending.
func TestDeletePreconditionRefusesRecreatedPod(t *testing.T) {
	h := setup(t, "it-precondition")
	const key = "example.com/broken"
	var (
		once     sync.Once
		firstUID atomic.Value // types.UID, set before the taint
		replaced = make(chan *corev1.Pod, 1)
	)
	ctrl := h.startController(true, func(ctx context.Context, pod *corev1.Pod) {
		if uid, _ := firstUID.Load().(types.UID); pod.UID != uid {
			return
		}
		once.Do(func() {
			zero := int64(0)
			err := h.c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
			})
			if !assert.NoError(t, err, "deleting the pod in BeforeDelete") {
				close(replaced)
				return
			}
			p, err := testenv.CreateBoundPod(ctx, h.c, testenv.NewPod(pod.Namespace, pod.Name, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(time.Hour),
			}), pod.Spec.NodeName)
			assert.NoError(t, err, "recreating the pod in BeforeDelete")
			replaced <- p
		})
	})
	node := h.node("node")
	first, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "web"), node)
	require.NoError(t, err)
	firstUID.Store(first.UID)
	w1 := h.watchPod(first)
	conflictsBefore := h.serverDeleteConflicts()

	_, err = testenv.TaintNode(h.ctx, h.c, node, testenv.NoExecuteTaint(key, "true"))
	require.NoError(t, err)

	var second *corev1.Pod
	select {
	case second = <-replaced:
		require.NotNil(t, second, "BeforeDelete failed")
	case <-time.After(10 * time.Second):
		t.Fatal("the controller never came to delete the pod")
	}
	w2 := h.watchPod(second)
	select {
	case <-ctrl.calls.conflict:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller's DELETE was not refused with 409 Conflict")
	}
	conflictAt := time.Now()
	w1.waitDeleted(t, 5*time.Second)
	require.NotNil(t, w1.disruptionTarget(), "the first pod got no DisruptionTarget condition")

	// The manager retries a refused eviction after 1 s, deciding for the
	// new pod; 3 s more is the margin.
	w2.stays(t, conflictAt.Add(4*time.Second))
	t.Logf("scenario 4b: controller saw %d DELETE conflicts (%v)", len(ctrl.calls.conflictCalls()), ctrl.calls.conflictCalls())
	assert.Greater(t, h.serverDeleteConflicts(), conflictsBefore, "apiserver_request_total{verb=DELETE,resource=pods,code=409} did not grow")

	got, err := h.c.CoreV1().Pods(h.ns).Get(h.ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, second.UID, got.UID)
	assert.Nil(t, condition(got, corev1.DisruptionTarget), "the new pod got a DisruptionTarget condition")
	assert.Nil(t, w2.disruptionTarget(), "the new pod got a DisruptionTarget condition")
	_, called := ctrl.deleteCalled(second.UID)
	assert.False(t, called, "the controller tried to delete the new pod")
	for _, e := range h.events("web", "Marking for deletion") {
		assert.Equal(t, first.UID, e.InvolvedObject.UID, "Marking for deletion event about the new pod")
	}
	assert.Equal(t, 0.0, ctrl.evictions(t, "deleted"))
	assert.Equal(t, 1.0, metricValue(t, ctrl.registry, kube.MetricEvictionsPending, "", ""), "the new pod's one-hour countdown")
}

// serverDeleteConflicts sums the API server's own
// apiserver_request_total{verb="DELETE",resource="pods",code="409"}.
func (h *harness) serverDeleteConflicts() float64 {
	h.t.Helper()
	raw, err := h.c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(h.ctx)
	require.NoError(h.t, err)
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok || !strings.Contains(labels, `verb="DELETE"`) || !strings.Contains(labels, `resource="pods"`) ||
			!strings.Contains(labels, `code="409"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		require.NoError(h.t, err, "metrics line %q", line)
		sum += v
	}
	require.NoError(h.t, sc.Err())
	return sum
}
