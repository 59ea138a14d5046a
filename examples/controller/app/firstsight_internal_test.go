package app

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func untimedNode(keys ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for _, k := range keys {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Effect: v1.TaintEffectNoExecute})
	}
	return n
}

// A taint's first sight stays while the taint does, and so does the first
// TimeAdded of a taint refreshed in place; a taint that left and came back
// is seen anew. A node's copy carries the sights, the cached node
// is untouched.
func TestFirstSightsOfTaints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFirstSights()
		t0 := time.Now()
		cached := untimedNode("a")
		f.sawNode(cached)
		time.Sleep(time.Second)
		f.sawNode(untimedNode("a", "b"))
		time.Sleep(time.Second)
		got := f.node(untimedNode("a", "b"))
		require.Len(t, got.Spec.Taints, 2)
		assert.True(t, got.Spec.Taints[0].TimeAdded.Time.Equal(t0), "a: %v", got.Spec.Taints[0].TimeAdded)
		assert.True(t, got.Spec.Taints[1].TimeAdded.Time.Equal(t0.Add(time.Second)), "b: %v", got.Spec.Taints[1].TimeAdded)
		assert.Nil(t, cached.Spec.Taints[0].TimeAdded, "the cached node changed")

		f.sawNode(untimedNode("b")) // a left
		time.Sleep(time.Second)
		got = f.node(untimedNode("a", "b"))
		assert.True(t, got.Spec.Taints[0].TimeAdded.Time.Equal(t0.Add(3*time.Second)), "a again: %v", got.Spec.Taints[0].TimeAdded)

		timed := untimedNode()
		timed.Spec.Taints = []v1.Taint{{Key: "c", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}}}
		assert.Same(t, timed, f.node(timed), "a node with no untimed taint is returned as is")

		// c refreshed in place: its first TimeAdded stands; gone and back, the new one.
		refreshed := untimedNode()
		refreshed.Spec.Taints = []v1.Taint{{Key: "c", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(time.Minute)}}}
		f.sawNode(refreshed)
		got = f.node(refreshed)
		assert.True(t, got.Spec.Taints[0].TimeAdded.Time.Equal(t0), "c refreshed: %v", got.Spec.Taints[0].TimeAdded)
		assert.True(t, refreshed.Spec.Taints[0].TimeAdded.Time.Equal(t0.Add(time.Minute)), "the cached node changed")
		f.sawNode(untimedNode())
		assert.Same(t, refreshed, f.node(refreshed), "c gone and back: counted from its new TimeAdded")
		f.nodeDeleted("n")
		assert.Empty(t, f.taints)
	})
}

// A pod's first sight is per UID and node; a pod with a PodScheduled time
// is returned as is and forgotten.
func TestFirstSightsOfPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFirstSights()
		t0 := time.Now()
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("u1")}, Spec: v1.PodSpec{NodeName: "n1"}}
		f.sawPod(pod)
		time.Sleep(time.Second)
		got := f.pod(pod)
		require.Len(t, got.Status.Conditions, 1)
		assert.Equal(t, v1.PodScheduled, got.Status.Conditions[0].Type)
		assert.True(t, got.Status.Conditions[0].LastTransitionTime.Time.Equal(t0))
		assert.Empty(t, pod.Status.Conditions, "the cached pod changed")

		moved := pod.DeepCopy()
		moved.Spec.NodeName = "n2"
		got = f.pod(moved)
		assert.True(t, got.Status.Conditions[0].LastTransitionTime.Time.Equal(t0.Add(time.Second)), "seen anew on another node")

		scheduled := pod.DeepCopy()
		scheduled.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0}}}
		assert.Same(t, scheduled, f.pod(scheduled))
		f.sawPod(scheduled)
		assert.Empty(t, f.pods, "a pod with a PodScheduled time is forgotten")

		f.sawPod(pod)
		f.podDeleted(pod.UID)
		assert.Empty(t, f.pods)
		unbound := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u2"}}
		assert.Same(t, unbound, f.pod(unbound), "a pod on no node has no countdown")
	})
}
