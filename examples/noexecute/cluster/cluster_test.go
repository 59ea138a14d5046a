package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/noexecute/cluster"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(name, node string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node}}
}

func TestPodsGetUIDsSchedulingTimeAndIndex(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := cluster.New(clk)
	a, err := c.AddPod(pod("a", "n1"))
	require.NoError(t, err)
	clk.Step(time.Second)
	b, err := c.AddPod(pod("b", "n1"))
	require.NoError(t, err)
	_, err = c.AddPod(pod("u", ""))
	require.NoError(t, err)

	assert.Equal(t, types.UID("uid-1"), a.UID)
	assert.Equal(t, types.UID("uid-2"), b.UID)
	assert.Equal(t, "default", a.Namespace)
	require.Len(t, a.Status.Conditions, 1)
	assert.Equal(t, v1.PodScheduled, a.Status.Conditions[0].Type)
	assert.True(t, a.Status.Conditions[0].LastTransitionTime.Time.Equal(t0))

	on, err := c.PodsOnNode("n1")
	require.NoError(t, err)
	require.Len(t, on, 2)
	assert.Equal(t, "a", on[0].Name)
	assert.Equal(t, "b", on[1].Name)

	_, err = c.AddPod(pod("a", "n2"))
	assert.True(t, apierrors.IsAlreadyExists(err), "got %v", err)

	// Moving a pod re-indexes it and re-stamps PodScheduled.
	moved := a.DeepCopy()
	moved.Spec.NodeName = "n2"
	m, err := c.UpdatePod(moved)
	require.NoError(t, err)
	assert.True(t, m.Status.Conditions[0].LastTransitionTime.Time.Equal(t0.Add(time.Second)))
	on, _ = c.PodsOnNode("n1")
	assert.Len(t, on, 1)
	on, _ = c.PodsOnNode("n2")
	assert.Len(t, on, 1)
}

func TestAddPodAsIsKeepsStatus(t *testing.T) {
	c := cluster.New(testingclock.NewFakeClock(t0))
	p, err := c.AddPodAsIs(pod("static", "n1"))
	require.NoError(t, err)
	assert.Equal(t, types.UID("uid-1"), p.UID)
	assert.Empty(t, p.Status.Conditions, "a pod created bound got a PodScheduled condition")
	on, err := c.PodsOnNode("n1")
	require.NoError(t, err)
	assert.Len(t, on, 1)
	_, err = c.AddPodAsIs(pod("static", "n1"))
	assert.True(t, apierrors.IsAlreadyExists(err), "got %v", err)
}

func TestDeletePodPreconditionsAndErrors(t *testing.T) {
	ctx := context.Background()
	c := cluster.New(testingclock.NewFakeClock(t0))
	p, err := c.AddPod(pod("a", "n1"))
	require.NoError(t, err)

	err = c.DeletePod(ctx, "default", "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}})
	assert.True(t, apierrors.IsConflict(err), "got %v", err)
	_, err = c.GetPod("default", "a")
	require.NoError(t, err, "a conflicting delete removed the pod")

	c.FailDeletes("default", "a", 2)
	for range 2 {
		err = c.DeletePod(ctx, "default", "a", metav1.DeleteOptions{})
		assert.True(t, apierrors.IsServiceUnavailable(err), "got %v", err)
	}
	require.NoError(t, c.DeletePod(ctx, "default", "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}))
	_, err = c.GetPod("default", "a")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	err = c.DeletePod(ctx, "default", "a", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)

	assert.Equal(t, cluster.Stats{DeleteCalls: 5, Deleted: 1, NotFound: 1, Conflicts: 1, Injected: 2}, c.Stats())
}

func TestGracefulDeleteMarksTerminating(t *testing.T) {
	ctx := context.Background()
	c := cluster.New(testingclock.NewFakeClock(t0))
	_, err := c.AddPod(pod("a", "n1"))
	require.NoError(t, err)
	require.NoError(t, c.DeletePod(ctx, "default", "a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	p, err := c.GetPod("default", "a")
	require.NoError(t, err)
	require.NotNil(t, p.DeletionTimestamp)
	require.NoError(t, c.DeletePod(ctx, "default", "a", metav1.DeleteOptions{}))
	assert.Equal(t, 0, c.NumPods())
}

func TestSetTaintsStampsTimeAddedOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := cluster.New(clk)
	require.NoError(t, c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
	a := v1.Taint{Key: "a", Effect: v1.TaintEffectNoExecute}
	b := v1.Taint{Key: "b", Effect: v1.TaintEffectNoExecute}
	require.NoError(t, c.SetTaints("n1", a))
	clk.Step(time.Minute)
	require.NoError(t, c.SetTaints("n1", a, b, v1.Taint{Key: "s", Effect: v1.TaintEffectNoSchedule}))
	n, err := c.GetNode("n1")
	require.NoError(t, err)
	require.Len(t, n.Spec.Taints, 3)
	assert.True(t, n.Spec.Taints[0].TimeAdded.Time.Equal(t0), "kept TimeAdded of an unchanged taint")
	assert.True(t, n.Spec.Taints[1].TimeAdded.Time.Equal(t0.Add(time.Minute)))
	assert.Nil(t, n.Spec.Taints[2].TimeAdded, "NoSchedule taints get no TimeAdded")

	err = c.SetTaints("nope", a)
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

func TestSetPodCondition(t *testing.T) {
	ctx := context.Background()
	c := cluster.New(testingclock.NewFakeClock(t0))
	p, err := c.AddPod(pod("a", "n1"))
	require.NoError(t, err)
	cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "DeletionByTaintManager"}
	err = c.SetPodCondition(ctx, "default", "a", "other", cond)
	assert.True(t, apierrors.IsConflict(err), "got %v", err)
	require.NoError(t, c.SetPodCondition(ctx, "default", "a", p.UID, cond))
	got, err := c.GetPod("default", "a")
	require.NoError(t, err)
	require.Len(t, got.Status.Conditions, 2)
	assert.Equal(t, "DeletionByTaintManager", got.Status.Conditions[1].Reason)
	assert.Len(t, p.Status.Conditions, 1, "a stored object was modified in place")
}

func TestHandlersSeeChangesInOrder(t *testing.T) {
	c := cluster.New(testingclock.NewFakeClock(t0))
	var (
		mu  sync.Mutex
		got []string
	)
	c.OnPod(func(old, new *v1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case old == nil:
			got = append(got, "add "+new.Name)
		case new == nil:
			got = append(got, "delete "+old.Name)
		default:
			got = append(got, "update "+new.Name)
		}
		// A handler may read the cluster.
		_, _ = c.GetPod("default", "a")
	})
	c.OnNode(func(old, new *v1.Node) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, "node "+map[bool]string{true: "add", false: "change"}[old == nil])
	})
	require.NoError(t, c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
	p, err := c.AddPod(pod("a", "n1"))
	require.NoError(t, err)
	p = p.DeepCopy()
	p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	_, err = c.UpdatePod(p)
	require.NoError(t, err)
	require.NoError(t, c.DeletePod(context.Background(), "default", "a", metav1.DeleteOptions{}))
	require.NoError(t, c.SetTaints("n1"))
	assert.Equal(t, []string{"node add", "add a", "update a", "delete a", "node change"}, got)
}
