package app_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

// A taint with no TimeAdded and a pod with no PodScheduled time: the
// countdown counts from when the controller first saw them. A standby sees
// them too (its caches are warm), and when it takes over it ends the
// countdown at the deadline counted from its own first sight, the old
// leader's give or take an informer's delivery, not a countdown restarted
// at the takeover.
func TestRunStandbyRemembersFirstSight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		node := taintedNode("node-1", t0)
		node.Spec.Taints[0].TimeAdded = nil
		pod := boundPod("daemon", "uid-daemon", "node-1", t0, ptr.To(10*time.Second))
		pod.Status.Conditions = nil // created with its node name: never scheduled
		client := newFakeAPI(node, pod)
		a, b, oa, ob := startPair(t, client)
		kubetest.RequireValue(t, oa.Registry, 1, kube.MetricEvictionsPending)

		time.Sleep(4 * time.Second)
		assert.NoError(t, a.stop())
		waitTakeover(t, client, ob)
		kubetest.RequireValue(t, ob.Registry, 1, kube.MetricEvictionsPending)

		assertDeletedAt(t, client, "daemon", t0.Add(10*time.Second), "the deadline counted from first sight")
		assert.NoError(t, b.stop())
	})
}

// A node deleted and created again (it re-registers) with the same taint
// with no TimeAdded: the new node's taint is a new taint, counted from its
// own first sight, not from the deleted node's. Found by the soak: with the
// deleted node's first sights kept, every other test passed and the soak's
// oracle saw 8 pods evicted 4.3–4.4 s early in 10 minutes.
func TestRunRecreatedNodeCountsUntimedTaintAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		node := taintedNode("node-1", t0)
		node.Spec.Taints[0].TimeAdded = nil
		client := newFakeAPI(node, boundPod("web", "uid-web", "node-1", t0, ptr.To(30*time.Second)))
		start(t, client, testOptions())
		synctest.Wait()

		time.Sleep(20 * time.Second)
		ctx := context.Background()
		require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}))
		synctest.Wait()
		time.Sleep(5 * time.Second)
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		synctest.Wait()

		recreated := t0.Add(25 * time.Second)
		assertDeletedAt(t, client, "web", recreated.Add(30*time.Second), "30 s from the new node's first sight")
	})
}

// A taint refreshed in place (the same key and effect, a later TimeAdded)
// has not left the node: the deadline counted from its first TimeAdded
// stands, and a standby that takes over after the refresh keeps it, as the
// leader would have, instead of counting from the TimeAdded it reads then.
// Found by the soak: a new leader evicted such pods 2–9 s late.
func TestRunStandbyKeepsDeadlineOfTaintRefreshedInPlace(t *testing.T) {
	standbyKeepsDeadline(t, "the deadline of the taint's first TimeAdded", func(ctx context.Context, client kubernetes.Interface, t0 time.Time) error {
		node, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err == nil {
			node.Spec.Taints[0].TimeAdded = ptr.To(metav1.NewTime(t0.Add(3 * time.Second)))
			_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		}
		return err
	})
}

// A longer toleration does not postpone an eviction while its taint stays:
// the leader keeps the deadline it had, and so does a standby that takes
// over after the change (it saw the pod on the tainted node and the change,
// as the leader did), instead of counting the longer toleration.
func TestRunStandbyKeepsDeadlineDespiteLongerToleration(t *testing.T) {
	standbyKeepsDeadline(t, "the deadline the leader kept", func(ctx context.Context, client kubernetes.Interface, _ time.Time) error {
		pod, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err == nil {
			pod.Spec.Tolerations[0].TolerationSeconds = ptr.To(int64(60))
			_, err = client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{})
		}
		return err
	})
}

// standbyKeepsDeadline runs a leader and a standby over a node tainted at
// t0 and a pod bound then, tolerating 10 s; makes change at t0+3s; stops
// the leader at t0+4s; and checks that the standby, now leading, deletes
// the pod at t0+10s.
func standbyKeepsDeadline(t *testing.T, why string, change func(ctx context.Context, client kubernetes.Interface, t0 time.Time) error) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		client := newFakeAPI(taintedNode("node-1", t0), boundPod("web", "uid-web", "node-1", t0, ptr.To(10*time.Second)))
		a, b, _, ob := startPair(t, client)

		time.Sleep(3 * time.Second)
		require.NoError(t, change(context.Background(), client, t0))
		synctest.Wait()

		time.Sleep(time.Second)
		assert.NoError(t, a.stop())
		waitTakeover(t, client, ob)

		assertDeletedAt(t, client, "web", t0.Add(10*time.Second), why)
		assert.NoError(t, b.stop())
	})
}
