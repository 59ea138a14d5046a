package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/tolerations"
)

// Scenario 1. A pod that does not tolerate a NoExecute taint goes at once:
// its DisruptionTarget condition is set first, a "Marking for deletion"
// event recorded, and it is deleted within 2 s of the taint (the issue's
// bound; measured here in the low hundreds of milliseconds).
func TestUntoleratedTaintEvictsAtOnce(t *testing.T) {
	h := setup(t, "it-untolerated")
	ctrl := h.startController(true, nil)
	node := h.node("node")
	pod, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "web"), node)
	require.NoError(t, err)
	w := h.watchPod(pod)

	tainted := time.Now()
	_, err = testenv.TaintNode(h.ctx, h.c, node, testenv.NoExecuteTaint("example.com/broken", "true"))
	require.NoError(t, err)

	gone := w.waitDeleted(t, 15*time.Second)
	took := gone.Sub(tainted)
	t.Logf("scenario 1: deleted %s after the taint", ms(took))
	assert.LessOrEqual(t, took, 2*time.Second, "deletion seen %s after the taint", ms(took))

	dt := w.disruptionTarget()
	require.NotNil(t, dt, "the pod never carried a DisruptionTarget condition")
	assert.Equal(t, corev1.ConditionTrue, dt.Status)
	assert.Equal(t, tolerations.ReasonDeletionByTaintManager, dt.Reason)

	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	ev, err := h.waitForEvent(ctx, pod, "Marking for deletion")
	require.NoError(t, err, "no Marking for deletion event")
	assert.Equal(t, pod.UID, ev.InvolvedObject.UID)
	assert.Equal(t, corev1.EventTypeNormal, ev.Type)
	assert.Equal(t, 1.0, ctrl.evictions(t, "deleted"))
}

// Scenario 2. tolerationSeconds: 5 counts from the later of the taint's
// TimeAdded and the pod's PodScheduled, as stored (whole seconds): the
// controller does not start deleting before that + 5 s, and the pod is gone
// by that + 7 s. Runs without leader election.
func TestTolerationSecondsCountdown(t *testing.T) {
	h := setup(t, "it-countdown")
	ctrl := h.startController(false, nil)
	const key = "example.com/maintenance"
	node := h.node("node")
	pod, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "web", corev1.Toleration{
		Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(5 * time.Second),
	}), node)
	require.NoError(t, err)
	w := h.watchPod(pod)
	tainted, err := testenv.TaintNode(h.ctx, h.c, node, testenv.NoExecuteTaint(key, "true"))
	require.NoError(t, err)
	start := countdownStart(t, tainted, key, pod)

	gone := w.waitDeleted(t, time.Until(start.Add(20*time.Second)))
	deleting, ok := ctrl.deleteCalled(pod.UID)
	require.True(t, ok, "the pod was deleted, but not by the controller")
	t.Logf("scenario 2: DELETE %s and deletion seen %s after the countdown start %s (deadline +5 s)",
		ms(deleting.Sub(start)), ms(gone.Sub(start)), start.Format(time.RFC3339))
	assert.False(t, deleting.Before(start.Add(5*time.Second)), "DELETE %s after the countdown start, before 5 s", ms(deleting.Sub(start)))
	assert.LessOrEqual(t, gone.Sub(start), 7*time.Second, "deleted %s after the countdown start", ms(gone.Sub(start)))
	require.NotNil(t, w.disruptionTarget(), "no DisruptionTarget condition")
}

// Scenario 6. A taint without TimeAdded and a pod created with
// spec.nodeName (no PodScheduled): neither start is known, so the countdown
// starts when the controller first sees both; the pod, created after the
// taint, goes once its 4 s toleration has run out from then. The
// controller cannot see the pod before its create was sent, so the DELETE
// comes no earlier than that + 4 s; the pod is gone by the create's return
// + 4 s + 3 s (the tolerance for the controller's first sight and the
// deletion's round trips on a loaded machine). A countdown restarted on
// every update would never end.
func TestUntimedTaintCountsFromFirstSight(t *testing.T) {
	h := setup(t, "it-untimed")
	ctrl := h.startController(true, nil)
	const key = "example.com/untimed"
	node := h.node("node", corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoExecute})

	const toleration = 4 * time.Second
	sent := time.Now()
	pod, err := testenv.CreatePodOnNode(h.ctx, h.c, testenv.NewPod(h.ns, "daemon", corev1.Toleration{
		Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(toleration),
	}), node)
	require.NoError(t, err)
	created := time.Now()
	require.Nil(t, condition(pod, corev1.PodScheduled), "a pod created on its node has no PodScheduled")
	w := h.watchPod(pod)

	// The kubelet would report the pod running: an update, which must not
	// restart the countdown.
	_, err = testenv.MarkPodReady(h.ctx, h.c, pod.Namespace, pod.Name)
	require.NoError(t, err)

	gone := w.waitDeleted(t, 20*time.Second)
	deleting, ok := ctrl.deleteCalled(pod.UID)
	require.True(t, ok, "the pod was deleted, but not by the controller")
	t.Logf("scenario 6: DELETE %s and deletion seen %s after the pod's create was sent (create took %s; toleration %v)",
		ms(deleting.Sub(sent)), ms(gone.Sub(sent)), ms(created.Sub(sent)), toleration)
	assert.False(t, deleting.Before(sent.Add(toleration)), "DELETE %s after the create, before the toleration ran out", ms(deleting.Sub(sent)))
	assert.LessOrEqual(t, gone.Sub(created), toleration+3*time.Second, "deleted %s after the create returned", ms(gone.Sub(created)))
	require.NotNil(t, w.disruptionTarget(), "no DisruptionTarget condition")
}
