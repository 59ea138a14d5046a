package noexecute_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
)

// A manager set up by NewLeaderFence, as main.go sets it up, writes no pod
// and no event through its client until it leads (its fence has seen no
// renewal), reads all the same, and once it leads writes (it evicts an
// untolerated pod). Then, its view of the Lease stale (another replica has
// just written it), it stops and releases on cancel: the Lease keeps the
// other replica's name.
func TestLeaderFenceWritesOnlyWhileLeading(t *testing.T) {
	h := setup(t, "cr-fence")
	const lease = "taintkit-fence"
	held := h.holdLease(lease)
	r := h.startReplica(replicaOptions{leaseName: lease, fenced: true})

	node := h.createNode("node")
	pod := h.createBoundPod("web", node)
	c := r.mgr.GetClient()
	err := c.Delete(h.ctx, pod.DeepCopy())
	assert.True(t, errors.Is(err, leasefence.ErrExpired), "a standby's pod delete: %v", err)
	err = c.Create(h.ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "web.standby"},
		EventTime: metav1.NewMicroTime(time.Now()), Regarding: v1.ObjectReference{Kind: "Pod", Namespace: h.ns, Name: pod.Name},
		ReportingController: "example.com/test", ReportingInstance: "standby", Action: "Test", Reason: "Test", Type: v1.EventTypeNormal})
	assert.True(t, errors.Is(err, leasefence.ErrExpired), "a standby's event: %v", err)
	var read v1.Pod
	assert.NoError(t, r.mgr.GetAPIReader().Get(h.ctx, client.ObjectKeyFromObject(pod), &read), "a standby's read")
	assert.False(t, r.fence.Allowed())

	require.NoError(t, h.c.Delete(h.ctx, held))
	h.waitElected(r, "fenced")
	h.setTaints(node, noExecuteTaint("example.com/broken"))
	h.waitGone(pod, 30*time.Second)
	_, ok := r.deleted(pod.UID)
	assert.True(t, ok, "once leading, the replica did not delete the pod")

	var l coordinationv1.Lease
	require.NoError(t, h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: lease}, &l))
	l.Spec.HolderIdentity = ptr.To("another-replica")
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
	require.NoError(t, h.c.Update(h.ctx, &l), "another replica takes the Lease over")
	r.stop(t)
	require.NoError(t, h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: lease}, &l))
	assert.Equal(t, "another-replica", ptr.Deref(l.Spec.HolderIdentity, ""), "the Lease's holder after the fenced replica released it")
}
