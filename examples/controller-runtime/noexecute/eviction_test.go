package noexecute_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taintkit/taintkit/tolerations"
)

// A pod that does not tolerate a NoExecute taint goes at once: its
// DisruptionTarget condition is set, a "Marking for deletion" event
// recorded, and it is deleted with its UID as a precondition within 2 s
// of the taint.
func TestUntoleratedPodIsEvicted(t *testing.T) {
	h := setup(t, "cr-untolerated")
	r := h.startReplica(replicaOptions{})
	node := h.createNode("node")
	pod := h.createBoundPod("web", node)

	tainted := time.Now()
	h.setTaints(node, noExecuteTaint("example.com/broken"))
	gone := h.waitGone(pod, 15*time.Second)
	t.Logf("deleted %s after the taint", ms(gone.Sub(tainted)))
	assert.LessOrEqual(t, gone.Sub(tainted), 2*time.Second)
	_, ok := r.deleted(pod.UID)
	assert.True(t, ok, "no DELETE with the pod's UID as precondition")

	var got v1.Pod
	require.NoError(t, h.c.Get(h.ctx, client.ObjectKeyFromObject(pod), &got))
	var dt *v1.PodCondition
	for i, c := range got.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			dt = &got.Status.Conditions[i]
		}
	}
	require.NotNil(t, dt, "no DisruptionTarget condition")
	assert.Equal(t, v1.ConditionTrue, dt.Status)
	assert.Equal(t, tolerations.ReasonDeletionByTaintManager, dt.Reason)
	ev := h.waitEvent(pod, "Marking for deletion", 10*time.Second)
	assert.Equal(t, tolerations.EventReasonTaintManagerEviction, ev.Reason)
	assert.Equal(t, "taintkit-noexecute", ev.ReportingController)
}

// tolerationSeconds: 5 counts from the later of the taint's TimeAdded and
// the pod's PodScheduled, as stored: the DELETE is sent no earlier than
// that + 5 s, and the pod is gone by that + 7 s.
func TestTolerationSecondsEvictOnTime(t *testing.T) {
	h := setup(t, "cr-on-time")
	r := h.startReplica(replicaOptions{})
	const key = "example.com/maintenance"
	node := h.createNode("node")
	pod := h.createBoundPod("web", node, tolerate(key, 5*time.Second))
	start := countdownStart(t, h.setTaints(node, noExecuteTaint(key)), key, pod)

	h.waitEvent(pod, "Scheduled for deletion", 10*time.Second)
	gone := h.waitGone(pod, time.Until(start.Add(20*time.Second)))
	deleting, ok := r.deleted(pod.UID)
	require.True(t, ok, "the pod went, but not by the Runnable's DELETE")
	t.Logf("DELETE %s and deletion seen %s after the countdown start", ms(deleting.Sub(start)), ms(gone.Sub(start)))
	assert.False(t, deleting.Before(start.Add(5*time.Second)), "DELETE %s after the start, before 5 s", ms(deleting.Sub(start)))
	assert.LessOrEqual(t, gone.Sub(start), 7*time.Second)
}

// A taint removed before the deadline cancels the countdown: "Cancelling
// deletion" is recorded and the pod is still there 2 s past the deadline.
func TestTaintRemovedCancelsEviction(t *testing.T) {
	h := setup(t, "cr-cancel")
	r := h.startReplica(replicaOptions{})
	const key = "example.com/maintenance"
	node := h.createNode("node")
	pod := h.createBoundPod("web", node, tolerate(key, 4*time.Second))
	start := countdownStart(t, h.setTaints(node, noExecuteTaint(key)), key, pod)
	h.waitEvent(pod, "Scheduled for deletion", 10*time.Second)

	h.setTaints(node)
	h.waitEvent(pod, "Cancelling deletion", 10*time.Second)
	h.requireStays(pod, time.Until(start.Add(4*time.Second+2*time.Second)))
	assert.Empty(t, r.podWrites(), "writes to pods")
}
