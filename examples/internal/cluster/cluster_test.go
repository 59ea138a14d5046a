package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
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

// ---- readiness, PodDisruptionBudgets and the Eviction API ----

// webPod is a pod of the app "web" on n1.
func webPod(name string) *v1.Pod {
	p := pod(name, "n1")
	p.Labels = map[string]string{"app": "web"}
	return p
}

// addReady adds webPod(name) and marks it Running and Ready.
func addReady(t *testing.T, c *cluster.Cluster, name string) *v1.Pod {
	t.Helper()
	p, err := c.AddPod(webPod(name))
	require.NoError(t, err)
	require.NoError(t, c.SetPodReady("default", name, true))
	return p
}

func minAvailable(name string, n int32, sel *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(n)), Selector: sel},
	}
}

var webSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

func isBudgetRefusal(err error) bool {
	return apierrors.IsTooManyRequests(err) && apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause)
}

func uidIs(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

func findCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestSetPodReady(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := cluster.New(clk)
	p, err := c.AddPod(pod("a", "n1"))
	require.NoError(t, err)
	assert.Equal(t, v1.PodPending, p.Status.Phase, "a new pod is Pending, as the API server makes it")
	var updates int
	c.OnPod(func(_, _ *v1.Pod) { updates++ })

	clk.Step(time.Second)
	require.NoError(t, c.SetPodReady("default", "a", true))
	p, err = c.GetPod("default", "a")
	require.NoError(t, err)
	assert.Equal(t, v1.PodRunning, p.Status.Phase)
	ready := findCondition(p, v1.PodReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	assert.True(t, ready.LastTransitionTime.Time.Equal(t0.Add(time.Second)))

	require.NoError(t, c.SetPodReady("default", "a", true))
	assert.Equal(t, 1, updates, "a pod already ready was updated")

	clk.Step(time.Second)
	require.NoError(t, c.SetPodReady("default", "a", false))
	p, _ = c.GetPod("default", "a")
	assert.Equal(t, v1.PodRunning, p.Status.Phase, "an unready pod keeps running")
	assert.Equal(t, v1.ConditionFalse, findCondition(p, v1.PodReady).Status)
	assert.True(t, findCondition(p, v1.PodReady).LastTransitionTime.Time.Equal(t0.Add(2*time.Second)))
	assert.Equal(t, 2, updates)

	done := pod("done", "n1")
	done.Status.Phase = v1.PodSucceeded
	_, err = c.AddPod(done)
	require.NoError(t, err)
	err = c.SetPodReady("default", "done", true)
	assert.True(t, apierrors.IsBadRequest(err), "got %v", err)
	err = c.SetPodReady("default", "nope", true)
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

func TestAddPDB(t *testing.T) {
	c := cluster.New(testingclock.NewFakeClock(t0))
	addReady(t, c, "w1")
	addReady(t, c, "w2")
	_, err := c.AddPod(pod("other", "n1"))
	require.NoError(t, err)

	got, err := c.AddPDB(minAvailable("web", 1, webSelector))
	require.NoError(t, err)
	assert.Equal(t, "default", got.Namespace)
	assert.Equal(t, policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2,
	}, got.Status)
	_, err = c.AddPDB(minAvailable("web", 1, webSelector))
	assert.True(t, apierrors.IsAlreadyExists(err), "got %v", err)

	// policy/v1: an empty selector covers every pod of the namespace, a nil
	// one none.
	all, err := c.AddPDB(minAvailable("all", 0, &metav1.LabelSelector{}))
	require.NoError(t, err)
	assert.Equal(t, int32(3), all.Status.ExpectedPods)
	assert.Equal(t, int32(2), all.Status.CurrentHealthy, "a Pending pod is not healthy")
	none, err := c.AddPDB(minAvailable("none", 0, nil))
	require.NoError(t, err)
	assert.Equal(t, int32(0), none.Status.ExpectedPods)

	elsewhere := minAvailable("web", 1, webSelector)
	elsewhere.Namespace = "prod"
	_, err = c.AddPDB(elsewhere)
	require.NoError(t, err)
	var names []string
	for _, p := range c.ListPDBs() {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	assert.Equal(t, []string{"default/all", "default/none", "default/web", "prod/web"}, names)
	prod, err := c.GetPDB("prod", "web")
	require.NoError(t, err)
	assert.Equal(t, int32(0), prod.Status.ExpectedPods, "a budget covered pods of another namespace")

	// A terminating pod is not healthy.
	require.NoError(t, c.DeletePod(context.Background(), "default", "w1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	web, err := c.GetPDB("default", "web")
	require.NoError(t, err)
	assert.Equal(t, int32(1), web.Status.CurrentHealthy)
	assert.Equal(t, int32(0), web.Status.DisruptionsAllowed)

	require.NoError(t, c.DeletePDB("prod", "web"))
	err = c.DeletePDB("prod", "web")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	_, err = c.GetPDB("prod", "web")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)

	percent := minAvailable("pct", 0, webSelector)
	percent.Spec.MinAvailable = ptr.To(intstr.FromString("50%"))
	_, err = c.AddPDB(percent)
	assert.ErrorContains(t, err, "integer spec.minAvailable")
	maxUnavailable := minAvailable("max", 0, webSelector)
	maxUnavailable.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	_, err = c.AddPDB(maxUnavailable)
	assert.ErrorContains(t, err, "integer spec.minAvailable")
	_, err = c.AddPDB(minAvailable("neg", -1, webSelector))
	assert.True(t, apierrors.IsInvalid(err), "got %v", err)
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	_, err = c.AddPDB(minAvailable("bad", 1, bad))
	assert.True(t, apierrors.IsInvalid(err), "got %v", err)
}

// The scenario of issue 11: minAvailable 2 over 3 ready pods lets one go,
// refuses the next, and lets it go once a replacement is ready.
func TestEvictPodRespectsPDB(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(t0)
	c := cluster.New(clk)
	var pods []*v1.Pod
	for _, name := range []string{"w1", "w2", "w3"} {
		pods = append(pods, addReady(t, c, name))
	}
	_, err := c.AddPDB(minAvailable("web", 2, webSelector))
	require.NoError(t, err)
	loner, err := c.AddPod(pod("loner", "n1"))
	require.NoError(t, err)
	require.NoError(t, c.SetPodReady("default", "loner", true))

	require.NoError(t, c.EvictPod(ctx, "default", "w1", uidIs(pods[0].UID)))
	_, err = c.GetPod("default", "w1")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)

	before, err := c.GetPod("default", "w2")
	require.NoError(t, err)
	err = c.EvictPod(ctx, "default", "w2", uidIs(pods[1].UID))
	require.True(t, isBudgetRefusal(err), "got %v", err)
	assert.Equal(t, "Cannot evict pod as it would violate the pod's disruption budget.", err.Error())
	cause, _ := apierrors.StatusCause(err, policyv1.DisruptionBudgetCause)
	assert.Equal(t, "The disruption budget web needs 2 healthy pods and has 2 currently", cause.Message)
	after, err := c.GetPod("default", "w2")
	require.NoError(t, err)
	assert.Same(t, before, after, "a refused eviction wrote to the pod")

	require.NoError(t, c.EvictPod(ctx, "default", "loner", uidIs(loner.UID)), "a pod no budget covers was refused")

	// A replacement counts once it is ready, not before.
	_, err = c.AddPod(webPod("w4"))
	require.NoError(t, err)
	err = c.EvictPod(ctx, "default", "w2", uidIs(pods[1].UID))
	require.True(t, isBudgetRefusal(err), "got %v", err)
	clk.Step(time.Minute)
	require.NoError(t, c.SetPodReady("default", "w4", true))
	require.NoError(t, c.EvictPod(ctx, "default", "w2", uidIs(pods[1].UID)))
	err = c.EvictPod(ctx, "default", "w3", uidIs(pods[2].UID))
	require.True(t, isBudgetRefusal(err), "got %v", err)

	web, err := c.GetPDB("default", "web")
	require.NoError(t, err)
	assert.Equal(t, policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1, DisruptionsAllowed: 0, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 2,
	}, web.Status)
	assert.Equal(t, cluster.Stats{EvictCalls: 6, Evicted: 3, Refused: 3, Deleted: 3}, c.Stats())
}

// The Eviction API ignores budgets for pods that are not running or are
// terminating; the evicted pod is marked DisruptionTarget and deleted as
// DeletePod would, with its grace period.
func TestEvictPodNotRunningIgnoresPDB(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(t0)
	c := cluster.New(clk)
	_, err := c.AddPDB(minAvailable("web", 5, webSelector))
	require.NoError(t, err)
	_, err = c.AddPod(webPod("pending"))
	require.NoError(t, err)
	for _, phase := range []v1.PodPhase{v1.PodSucceeded, v1.PodFailed} {
		p := webPod(string(phase))
		p.Status.Phase = phase
		_, err = c.AddPod(p)
		require.NoError(t, err)
	}
	addReady(t, c, "going")
	require.NoError(t, c.DeletePod(ctx, "default", "going", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	addReady(t, c, "ready")

	for _, name := range []string{"pending", "Succeeded", "Failed", "going"} {
		assert.NoError(t, c.EvictPod(ctx, "default", name, metav1.DeleteOptions{}), name)
	}
	err = c.EvictPod(ctx, "default", "ready", metav1.DeleteOptions{})
	assert.True(t, isBudgetRefusal(err), "got %v", err)
	left := c.ListPods()
	require.Len(t, left, 1)
	assert.Equal(t, "ready", left[0].Name)

	// With a grace period the evicted pod is terminating and says why.
	_, err = c.AddPod(webPod("slow"))
	require.NoError(t, err)
	clk.Step(time.Second)
	require.NoError(t, c.EvictPod(ctx, "default", "slow", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	slow, err := c.GetPod("default", "slow")
	require.NoError(t, err)
	require.NotNil(t, slow.DeletionTimestamp)
	assert.True(t, slow.DeletionTimestamp.Time.Equal(t0.Add(time.Second)))
	cond := findCondition(slow, v1.DisruptionTarget)
	require.NotNil(t, cond)
	assert.Equal(t, v1.ConditionTrue, cond.Status)
	assert.Equal(t, "EvictionByEvictionAPI", cond.Reason)
	assert.True(t, cond.LastTransitionTime.Time.Equal(t0.Add(time.Second)))
	assert.Equal(t, cluster.Stats{DeleteCalls: 1, EvictCalls: 6, Evicted: 5, Refused: 1, Deleted: 4, Terminating: 2}, c.Stats())
}

// A Running pod that is not Ready takes nothing from its budget.
func TestEvictPodUnready(t *testing.T) {
	ctx := context.Background()
	c := cluster.New(testingclock.NewFakeClock(t0))
	addReady(t, c, "w1")
	addReady(t, c, "w2")
	for _, name := range []string{"u1", "u2"} {
		addReady(t, c, name)
		require.NoError(t, c.SetPodReady("default", name, false))
	}
	_, err := c.AddPDB(minAvailable("web", 2, webSelector))
	require.NoError(t, err)
	require.NoError(t, c.EvictPod(ctx, "default", "u1", metav1.DeleteOptions{}), "an unready pod of a healthy budget")

	require.NoError(t, c.SetPodReady("default", "w2", false))
	err = c.EvictPod(ctx, "default", "u2", metav1.DeleteOptions{})
	assert.True(t, isBudgetRefusal(err), "an unready pod of a budget short of healthy pods: got %v", err)

	require.NoError(t, c.DeletePDB("default", "web"))
	always := minAvailable("web", 2, webSelector)
	always.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	_, err = c.AddPDB(always)
	require.NoError(t, err)
	require.NoError(t, c.EvictPod(ctx, "default", "u2", metav1.DeleteOptions{}), "AlwaysAllow")
	err = c.EvictPod(ctx, "default", "w1", metav1.DeleteOptions{})
	assert.True(t, isBudgetRefusal(err), "AlwaysAllow let a ready pod go: got %v", err)
}

func TestEvictPodErrors(t *testing.T) {
	ctx := context.Background()
	c := cluster.New(testingclock.NewFakeClock(t0))
	w1 := addReady(t, c, "w1")
	addReady(t, c, "w2")
	_, err := c.AddPDB(minAvailable("web", 1, webSelector))
	require.NoError(t, err)

	err = c.EvictPod(ctx, "default", "nope", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)

	before, err := c.GetPod("default", "w1")
	require.NoError(t, err)
	err = c.EvictPod(ctx, "default", "w1", uidIs("other"))
	assert.True(t, apierrors.IsConflict(err), "got %v", err)
	after, err := c.GetPod("default", "w1")
	require.NoError(t, err)
	assert.Same(t, before, after, "a conflicting eviction wrote to the pod")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, c.EvictPod(cancelled, "default", "w1", metav1.DeleteOptions{}), context.Canceled)

	// Throttling is a 429 without the budget's cause, and comes before an
	// injected failure.
	c.ThrottleDeletes("default", "w1", 1)
	c.FailDeletes("default", "w1", 1)
	err = c.EvictPod(ctx, "default", "w1", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsTooManyRequests(err), "got %v", err)
	assert.False(t, apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause), "throttling looked like a budget")
	err = c.EvictPod(ctx, "default", "w1", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsServiceUnavailable(err), "got %v", err)
	c.ThrottleDeletes("default", "w2", 1)
	err = c.DeletePod(ctx, "default", "w2", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsTooManyRequests(err), "DeletePod was not throttled: got %v", err)

	// The budget is checked before the UID precondition, as on the server.
	require.NoError(t, c.EvictPod(ctx, "default", "w1", uidIs(w1.UID)))
	err = c.EvictPod(ctx, "default", "w2", uidIs("other"))
	assert.True(t, isBudgetRefusal(err), "got %v", err)

	// Two budgets over one pod: the server's 500.
	_, err = c.AddPDB(minAvailable("all", 0, &metav1.LabelSelector{}))
	require.NoError(t, err)
	err = c.EvictPod(ctx, "default", "w2", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsInternalError(err), "got %v", err)
	assert.Contains(t, err.Error(), "more than one PodDisruptionBudget")
	_, err = c.GetPod("default", "w2")
	require.NoError(t, err)

	assert.Equal(t, cluster.Stats{DeleteCalls: 1, EvictCalls: 7, Evicted: 1, Deleted: 1,
		NotFound: 1, Conflicts: 1, Injected: 1, Throttled: 2, Refused: 1}, c.Stats())
}

func TestEvictPodNotifications(t *testing.T) {
	ctx := context.Background()
	c := cluster.New(testingclock.NewFakeClock(t0))
	addReady(t, c, "w1")
	addReady(t, c, "w2")
	addReady(t, c, "w3")
	_, err := c.AddPDB(minAvailable("web", 1, webSelector))
	require.NoError(t, err)
	var got []string
	c.OnPod(func(old, new *v1.Pod) {
		switch {
		case new == nil:
			got = append(got, "delete "+old.Name)
		case new.DeletionTimestamp != nil:
			got = append(got, "terminating "+new.Name)
		case findCondition(new, v1.DisruptionTarget) != nil:
			// The condition is visible to readers when handlers hear of it.
			cur, err := c.GetPod(new.Namespace, new.Name)
			require.NoError(t, err)
			assert.Same(t, new, cur)
			got = append(got, "target "+new.Name)
		default:
			got = append(got, "update "+new.Name)
		}
	})
	require.NoError(t, c.EvictPod(ctx, "default", "w1", metav1.DeleteOptions{}))
	require.NoError(t, c.EvictPod(ctx, "default", "w2", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	err = c.EvictPod(ctx, "default", "w3", metav1.DeleteOptions{})
	require.True(t, isBudgetRefusal(err), "got %v", err)
	// A terminating pod goes without asking its budget; it has its
	// condition already, so the only write is the removal.
	require.NoError(t, c.EvictPod(ctx, "default", "w2", metav1.DeleteOptions{}))
	assert.Equal(t, []string{"target w1", "delete w1", "target w2", "terminating w2", "delete w2"}, got)
}

// Concurrent evictions never take a budget below its minimum, and each is
// either let through or refused.
func TestEvictPodConcurrent(t *testing.T) {
	ctx := context.Background()
	c := cluster.New(testingclock.NewFakeClock(t0))
	const pods, keep = 20, 15
	for i := range pods {
		addReady(t, c, fmt.Sprintf("w%d", i))
	}
	_, err := c.AddPDB(minAvailable("web", keep, webSelector))
	require.NoError(t, err)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := c.GetPDB("default", "web")
			if assert.NoError(t, err) {
				assert.GreaterOrEqual(t, b.Status.CurrentHealthy, int32(keep))
			}
			_ = c.ListPods()
		}
	})
	var ew sync.WaitGroup
	for i := range pods {
		ew.Go(func() {
			err := c.EvictPod(ctx, "default", fmt.Sprintf("w%d", i), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)})
			assert.True(t, err == nil || isBudgetRefusal(err), "got %v", err)
		})
	}
	ew.Wait()
	close(stop)
	wg.Wait()
	st := c.Stats()
	assert.Equal(t, pods-keep, st.Evicted)
	assert.Equal(t, keep, st.Refused)
	assert.Equal(t, pods-keep, st.Terminating)
}
