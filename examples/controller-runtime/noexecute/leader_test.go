package noexecute_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
)

// Two managers elect a leader on a Lease of the API server. The leader
// schedules the eviction of a pod tolerating 10 s, then its context is
// cancelled (it releases the Lease); the standby takes over and deletes
// the pod at the original deadline ± 2 s, never before it: the deadline
// comes from the objects, not from when the new leader saw them.
func TestLeaderChangeKeepsDeadline(t *testing.T) {
	h := setup(t, "cr-leader")
	const lease, key = "taintkit-leader", "example.com/maintenance"
	a := h.startReplica(replicaOptions{leaseName: lease})
	h.waitElected(a, "first")
	b := h.startReplica(replicaOptions{leaseName: lease})
	node := h.createNode("node")
	pod := h.createBoundPod("web", node, tolerate(key, 10*time.Second))
	deadline := countdownStart(t, h.setTaints(node, noExecuteTaint(key)), key, pod).Add(10 * time.Second)
	h.waitEvent(pod, "Scheduled for deletion", 10*time.Second)
	select {
	case <-b.mgr.Elected():
		t.Fatal("the standby was elected while the leader led")
	default:
	}

	a.stop(t)
	stopped := time.Now()
	elected := h.waitElected(b, "second")
	t.Logf("the standby led %s after the leader stopped, %s before the deadline", ms(elected.Sub(stopped)), ms(deadline.Sub(elected)))
	require.True(t, elected.Before(deadline), "took over after the deadline: the test proves nothing")

	gone := h.waitGone(pod, time.Until(deadline.Add(15*time.Second)))
	deleting, ok := b.deleted(pod.UID)
	require.True(t, ok, "the new leader did not send the DELETE")
	_, byOld := a.deleted(pod.UID)
	assert.False(t, byOld, "the old leader deleted the pod")
	t.Logf("DELETE %s after the original deadline, deletion seen %s after it", ms(deleting.Sub(deadline)), ms(gone.Sub(deadline)))
	assert.False(t, deleting.Before(deadline), "deleted %s before the deadline", ms(deadline.Sub(deleting)))
	assert.LessOrEqual(t, deleting.Sub(deadline), 2*time.Second)
}

// A replica that does not hold the Lease must not act: with the Lease held
// by another identity, it syncs its caches (/readyz 200), and an
// untolerated pod, which a leader deletes within milliseconds, stays for
// 3 s with no write to any pod. Once the Lease is free it leads and
// deletes the pod: it had all it needed to act and did not.
func TestStandbyDoesNotAct(t *testing.T) {
	h := setup(t, "cr-standby")
	const lease = "taintkit-standby"
	held := h.holdLease(lease)
	probes := freeAddr(t)
	s := h.startReplica(replicaOptions{leaseName: lease, probes: probes})
	h.requireHTTP200("http://" + probes + "/readyz")
	h.requireHTTP200("http://" + probes + "/healthz")

	node := h.createNode("node")
	pod := h.createBoundPod("web", node)
	h.setTaints(node, noExecuteTaint("example.com/broken"))
	h.requireStays(pod, 3*time.Second)
	assert.Empty(t, s.podWrites(), "the standby wrote to pods")
	select {
	case <-s.mgr.Elected():
		t.Fatal("elected although another replica holds the Lease")
	default:
	}

	freed := time.Now()
	require.NoError(t, h.c.Delete(h.ctx, held))
	h.waitElected(s, "standby")
	gone := h.waitGone(pod, 30*time.Second)
	_, ok := s.deleted(pod.UID)
	assert.True(t, ok, "once leading, the replica did not delete the pod")
	t.Logf("deleted %s after the Lease was freed", ms(gone.Sub(freed)))
}

// holdLease creates the Lease named name in the test's namespace, held
// for an hour by another identity, and returns it.
func (h *harness) holdLease(name string) *coordinationv1.Lease {
	h.t.Helper()
	now := metav1.NewMicroTime(time.Now())
	held := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime: &now, RenewTime: &now},
	}
	require.NoError(h.t, h.c.Create(h.ctx, held))
	return held
}

// waitElected waits until r's manager leads, and returns when it did.
func (h *harness) waitElected(r *replica, which string) time.Time {
	h.t.Helper()
	select {
	case <-r.mgr.Elected():
		return time.Now()
	case <-time.After(30 * time.Second):
		h.t.Fatalf("the %s replica was not elected within 30 s", which)
		return time.Time{}
	}
}

// requireHTTP200 GETs url and requires a 200. (The probe server's
// listener is bound by ctrl.NewManager: a request made after it returned
// waits for the server, it is not refused.)
func (h *harness) requireHTTP200(url string) {
	h.t.Helper()
	resp, err := http.Get(url)
	require.NoError(h.t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
}

// A taint with no TimeAdded and a pod with no PodScheduled condition (made
// with its node name, as a static or DaemonSet-like pod is): the countdown
// runs from when the pod was first seen on the tainted node. The standby
// saw them too, through handlers registered when it was set up, not when it
// began to lead: once the leader is stopped, at least 5 s later, the new
// leader deletes the pod at that first sight + 15 s ± 2 s, not 15 s after
// it took over.
func TestLeaderChangeKeepsFirstSightDeadline(t *testing.T) {
	h := setup(t, "cr-first-sight")
	const lease, key = "taintkit-first-sight", "example.com/untimed"
	a := h.startReplica(replicaOptions{leaseName: lease})
	h.waitElected(a, "first")
	b := h.startReplica(replicaOptions{leaseName: lease})
	node := h.createNode("node")
	h.setTaints(node, v1.Taint{Key: key, Value: "true", Effect: v1.TaintEffectNoExecute}) // no TimeAdded
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "daemon"},
		Spec: v1.PodSpec{NodeName: node, Tolerations: []v1.Toleration{tolerate(key, 15*time.Second)},
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	require.NoError(t, h.c.Create(h.ctx, pod))
	seen := h.waitSeen(pod)
	for _, c := range pod.Status.Conditions {
		require.NotEqual(t, v1.PodScheduled, c.Type, "the pod has a PodScheduled condition: the test proves nothing")
	}
	deadline := seen.Add(15 * time.Second)
	h.waitEvent(pod, "Scheduled for deletion", 10*time.Second)

	h.requireStays(pod, time.Until(seen.Add(5*time.Second))) // not due yet
	a.stop(t)
	elected := h.waitElected(b, "second")
	t.Logf("the standby led %s after first sight, %s before the deadline", ms(elected.Sub(seen)), ms(deadline.Sub(elected)))
	require.True(t, elected.Before(deadline.Add(-2*time.Second)), "took over too late: the test proves nothing")

	h.waitGone(pod, time.Until(deadline.Add(30*time.Second)))
	deleting, ok := b.deleted(pod.UID)
	require.True(t, ok, "the new leader did not send the DELETE")
	t.Logf("DELETE %s after first sight + 15 s", ms(deleting.Sub(deadline)))
	assert.InDelta(t, 0, deleting.Sub(deadline).Seconds(), 2, "deleted %s after the first-sight deadline", ms(deleting.Sub(deadline)))
}

// waitSeen waits until the test's own watch sees pod, fills it in from the
// watch, and returns when it saw it.
func (h *harness) waitSeen(pod *v1.Pod) time.Time {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	err := testenv.WaitFor(ctx, h.c, &v1.PodList{}, func(ev watch.Event) bool {
		if p, _ := ev.Object.(*v1.Pod); p != nil && p.UID == pod.UID {
			p.DeepCopyInto(pod)
			return true
		}
		return false
	}, client.InNamespace(pod.Namespace))
	require.NoError(h.t, err, "the test's watch never saw pod %s/%s", pod.Namespace, pod.Name)
	return time.Now()
}
