package app_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/tolerations"
)

// Tests of --device-taints on a fake API server in a synctest bubble: the
// deadlines exact, the guard's holds and releases deterministic.

const gpuDriver = "gpu.example.com"

// gpuSlice is node-1's pool "pool" of devices gpu-0 … gpu-(n-1), untainted.
func gpuSlice(n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: resourcev1.ResourceSliceSpec{Driver: gpuDriver, Pool: resourcev1.ResourcePool{Name: "pool", Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To("node-1")},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return s
}

// gpuPod is the pod default/name bound to node-1 at boundAt with its claim
// name-gpu, allocated gpu-i tolerating the taint key for tolerate (nil:
// not at all) and reserved for it.
func gpuPod(name string, i int, boundAt time.Time, tolerate *time.Duration) (*v1.Pod, *resourcev1.ResourceClaim) {
	uid := types.UID("uid-" + name)
	pod := boundPod(name, uid, "node-1", boundAt, nil)
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name + "-gpu")}}
	var tols []resourcev1.DeviceToleration
	if tolerate != nil {
		tols = []resourcev1.DeviceToleration{{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpExists,
			TolerationSeconds: ptr.To(int64(*tolerate / time.Second))}}
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-gpu"},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: gpuDriver, Pool: "pool", Device: fmt.Sprintf("gpu-%d", i), Tolerations: tols,
			}}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: uid}},
		},
	}
	return pod, claim
}

// brokenRule is a DeviceTaintRule over sel, NoExecute, added at addedAt.
func brokenRule(name string, sel resourcev1.DeviceTaintSelector, addedAt time.Time) *resourcev1.DeviceTaintRule {
	return &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: &sel, Taint: resourcev1.DeviceTaint{
			Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(addedAt)),
		}},
	}
}

// inPodGroup puts pod in the PodGroup group and returns it.
func inPodGroup(pod *v1.Pod, group string) *v1.Pod {
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return pod
}

// reservedForPodGroup reserves claim for the PodGroup group, as the
// scheduler reserves a claim the pods of a group share, and returns it.
func reservedForPodGroup(claim *resourcev1.ResourceClaim, group string) *resourcev1.ResourceClaim {
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{
		{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: group, UID: types.UID("uid-" + group)},
	}
	return claim
}

// fromTemplate makes claim one made from a template for the pod's claim
// "gpu" and owned by owner, and names it in the pod's status.
func fromTemplate(pod *v1.Pod, claim *resourcev1.ResourceClaim, owner metav1.OwnerReference) {
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
	owner.Controller = ptr.To(true)
	claim.OwnerReferences = []metav1.OwnerReference{owner}
}

// A claim's devices count for a pod when the claim is allocated and
// reserved for it: for the pod's UID, or for its PodGroup, which the pods
// of a group share a claim through. A claim made from a template counts
// only for the pod, or the PodGroup, that owns it.
func TestPodDevicesFollowsReservation(t *testing.T) {
	t0 := time.Now()
	gpu0 := tolerations.DeviceID{Driver: gpuDriver, Pool: "pool", Device: "gpu-0"}
	rule := brokenRule("broken", resourcev1.DeviceTaintSelector{}, t0)
	for _, tc := range []struct {
		name  string
		setUp func(pod *v1.Pod, claim *resourcev1.ResourceClaim)
		want  []tolerations.DeviceID
	}{
		{"reserved for the pod", func(*v1.Pod, *resourcev1.ResourceClaim) {}, []tolerations.DeviceID{gpu0}},
		{"reserved for its PodGroup", func(pod *v1.Pod, claim *resourcev1.ResourceClaim) {
			inPodGroup(pod, "train")
			reservedForPodGroup(claim, "train")
		}, []tolerations.DeviceID{gpu0}},
		{"reserved for another PodGroup", func(pod *v1.Pod, claim *resourcev1.ResourceClaim) {
			inPodGroup(pod, "train")
			reservedForPodGroup(claim, "serve")
		}, nil},
		{"reserved for a PodGroup, the pod in none", func(_ *v1.Pod, claim *resourcev1.ResourceClaim) {
			reservedForPodGroup(claim, "train")
		}, nil},
		{"reserved for a pod of the same name before it", func(_ *v1.Pod, claim *resourcev1.ResourceClaim) {
			claim.Status.ReservedFor[0].UID = "uid-before"
		}, nil},
		{"not allocated", func(_ *v1.Pod, claim *resourcev1.ResourceClaim) {
			claim.Status.Allocation = nil
		}, nil},
		{"from a template, owned by the pod", func(pod *v1.Pod, claim *resourcev1.ResourceClaim) {
			fromTemplate(pod, claim, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID})
		}, []tolerations.DeviceID{gpu0}},
		{"from a template, owned by its PodGroup", func(pod *v1.Pod, claim *resourcev1.ResourceClaim) {
			inPodGroup(pod, "train")
			reservedForPodGroup(claim, "train")
			fromTemplate(pod, claim, metav1.OwnerReference{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "train", UID: "uid-train"})
		}, []tolerations.DeviceID{gpu0}},
		// The pod's status names a claim another pod owns: not the pod's,
		// whomever it is reserved for.
		{"from a template, owned by another pod", func(pod *v1.Pod, claim *resourcev1.ResourceClaim) {
			fromTemplate(pod, claim, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "other", UID: "uid-other"})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, claim := gpuPod("web", 0, t0, nil)
			tc.setUp(pod, claim)
			var got []tolerations.DeviceID
			for _, d := range app.PodDevices(pod, gpuSlice(1), rule, claim) {
				got = append(got, d.ID)
				assert.Equal(t, []tolerations.DeviceTaint{{DeviceTaint: rule.Spec.Taint, Rule: rule.Name}}, d.Taints, "the device's taints")
			}
			assert.Equal(t, tc.want, got, "the pod's devices")
		})
	}
}

// Pods that share a claim through their PodGroup go when a rule taints its
// device: the rule's arrival has the group's pods decided again.
func TestRunDeviceTaintEvictsPodGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := startPodGroup(t, 0)
		assert.False(t, podExists(t, client, "p0"), "p0, in the PodGroup its claim is reserved for, not evicted")
		assert.False(t, podExists(t, client, "p1"), "p1, in the PodGroup its claim is reserved for, not evicted")
		assert.True(t, podExists(t, client, "other"), "a pod of another PodGroup evicted")
	})
}

// The guard counts the pods a claim reserved for their PodGroup holds
// devices of: two, over a limit of one.
func TestRunDeviceRuleGuardCountsPodGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := startPodGroup(t, 1)
		assert.True(t, podExists(t, client, "p0"), "p0 evicted by a held rule")
		assert.True(t, podExists(t, client, "p1"), "p1 evicted by a held rule")
		assert.Contains(t, ruleCondition(t, client, "broken").Message, "2 pods would be evicted")
	})
}

// startPodGroup runs the controller with the limit maxPods on pods p0 and
// p1 of the PodGroup "train", which share a claim of gpu-0 reserved for the
// group, and "other" of the PodGroup "serve", whose claim of gpu-1 is
// reserved for "train"; then it creates the rule "broken" over every
// device, which none of them tolerates. It returns the fake API server, in
// the bubble.
func startPodGroup(t *testing.T, maxPods int) *fake.Clientset {
	t0 := time.Now()
	p0, claim := gpuPod("p0", 0, t0, nil)
	p1, _ := gpuPod("p1", 0, t0, nil)
	p1.Spec.ResourceClaims = p0.Spec.ResourceClaims // p0's claim, shared
	other, otherClaim := gpuPod("other", 1, t0, nil)
	client := newFakeAPI(gpuSlice(2), inPodGroup(p0, "train"), inPodGroup(p1, "train"), reservedForPodGroup(claim, "train"),
		inPodGroup(other, "serve"), reservedForPodGroup(otherClaim, "train"))
	startDevices(t, client, maxPods)
	_, err := client.ResourceV1().DeviceTaintRules().Create(context.Background(),
		brokenRule("broken", resourcev1.DeviceTaintSelector{}, t0), metav1.CreateOptions{})
	require.NoError(t, err)
	synctest.Wait()
	return client
}

// startDevices runs the controller with --device-taints and the limit.
func startDevices(t *testing.T, client kubernetes.Interface, maxPods int) *running {
	o := testOptions()
	o.DeviceTaints, o.DeviceTaintRuleMaxPods = true, maxPods
	r := start(t, client, o)
	synctest.Wait()
	return r
}

// ruleCondition returns the rule's EvictionInProgress condition (zero if
// none).
func ruleCondition(t *testing.T, client kubernetes.Interface, name string) metav1.Condition {
	t.Helper()
	r, err := client.ResourceV1().DeviceTaintRules().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	i := slices.IndexFunc(r.Status.Conditions, func(c metav1.Condition) bool { return c.Type == resourcev1.DeviceTaintConditionEvictionInProgress })
	if i < 0 {
		return metav1.Condition{}
	}
	return r.Status.Conditions[i]
}

// A device taint tolerated 10 s ends at TimeAdded + 10 s exactly; a
// standby that takes over at +4 s ends it there too.
func TestRunDeviceTaintDeadlineSurvivesTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		pod, claim := gpuPod("web", 0, t0.Add(-time.Minute), ptr.To(10*time.Second))
		client := newFakeAPI(gpuSlice(1), pod, claim, brokenRule("broken", resourcev1.DeviceTaintSelector{}, t0))
		ob := leaderOptions("replica-b")
		oa := leaderOptions("replica-a")
		oa.DeviceTaints, ob.DeviceTaints = true, true
		a := start(t, client, oa)
		synctest.Wait()
		b := start(t, client, ob)
		synctest.Wait()

		time.Sleep(4 * time.Second)
		assert.NoError(t, a.stop())
		waitTakeover(t, client, ob)
		assertDeletedAt(t, client, "web", t0.Add(10*time.Second), "TimeAdded + 10 s")
		assert.NoError(t, b.stop())
	})
}

// The guard: a rule that would evict 3 pods over a limit of 2 evicts none,
// and its status says TooManyPods; narrowed to 2 pods it is released and
// they go at once, the third stays.
func TestRunDeviceRuleGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, rule := startHeldRule(t)
		ctx := context.Background()
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, name := range []string{"p0", "p1", "p2"} {
			assert.True(t, podExists(t, client, name), "%s evicted by a held rule", name)
		}
		cond := ruleCondition(t, client, "everything")
		assert.Equal(t, "TooManyPods", cond.Reason)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, "3 pods would be evicted in 1 namespace, more than the limit of 2 (--device-taint-rule-max-pods): no eviction started. Narrow the rule's selector or raise the limit.", cond.Message)

		// Narrowed to gpu-0 (the fake server does not count generations:
		// the test does, as the API server would).
		rule, err := client.ResourceV1().DeviceTaintRules().Get(ctx, rule.Name, metav1.GetOptions{})
		require.NoError(t, err)
		rule.Spec.DeviceSelector = &resourcev1.DeviceTaintSelector{Driver: ptr.To(gpuDriver), Pool: ptr.To("pool"), Device: ptr.To("gpu-0")}
		rule.Generation++
		_, err = client.ResourceV1().DeviceTaintRules().Update(ctx, rule, metav1.UpdateOptions{})
		require.NoError(t, err)
		synctest.Wait()
		assert.False(t, podExists(t, client, "p0"), "the released rule's overdue pod not evicted at once")
		assert.True(t, podExists(t, client, "p1"))
		assert.True(t, podExists(t, client, "p2"))
		time.Sleep(ruleStatusPeriod)
		synctest.Wait()
		cond = ruleCondition(t, client, "everything")
		assert.Equal(t, "Completed", cond.Reason)
		assert.Equal(t, "1 pod evicted since starting the controller.", cond.Message)
		assert.Equal(t, int64(2), cond.ObservedGeneration)
	})
}

// startHeldRule runs the controller with a limit of 2 on pods p0, p1 and
// p2, each on a device of its own that it does not tolerate, and creates
// the rule "everything" (an empty selector): over the limit. It returns
// the fake API server and the rule as created, in the bubble.
func startHeldRule(t *testing.T) (*fake.Clientset, *resourcev1.DeviceTaintRule) {
	t0 := time.Now()
	objs := []runtime.Object{gpuSlice(3)}
	for i, name := range []string{"p0", "p1", "p2"} {
		pod, claim := gpuPod(name, i, t0, nil)
		objs = append(objs, pod, claim)
	}
	client := newFakeAPI(objs...)
	startDevices(t, client, 2)
	rule, err := client.ResourceV1().DeviceTaintRules().Create(context.Background(), brokenRule("everything", resourcev1.DeviceTaintSelector{}, t0), metav1.CreateOptions{})
	require.NoError(t, err)
	synctest.Wait()
	return client, rule
}

// ruleStatusPeriod is the controller's shortest time between two writes of
// a rule's status.
const ruleStatusPeriod = 10 * time.Second

// A rule within the limit that a new claim takes past it is held mid-way:
// the countdowns running stop; the claim's pod deleted, it is released and
// they end at their original deadlines.
func TestRunDeviceRuleGuardGrowth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		p0, c0 := gpuPod("p0", 0, t0, ptr.To(30*time.Second))
		p1, c1 := gpuPod("p1", 1, t0, ptr.To(30*time.Second))
		client := newFakeAPI(gpuSlice(3), p0, c0, p1, c1, brokenRule("pool", resourcev1.DeviceTaintSelector{Pool: ptr.To("pool")}, t0))
		startDevices(t, client, 2)
		time.Sleep(10 * time.Second)
		synctest.Wait()

		ctx := context.Background()
		p2, c2 := gpuPod("p2", 2, t0.Add(10*time.Second), ptr.To(30*time.Second))
		_, err := client.CoreV1().Pods("default").Create(ctx, p2, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = client.ResourceV1().ResourceClaims("default").Create(ctx, c2, metav1.CreateOptions{})
		require.NoError(t, err)
		synctest.Wait()
		time.Sleep(30 * time.Second) // past p0's and p1's deadline
		synctest.Wait()
		for _, name := range []string{"p0", "p1", "p2"} {
			assert.True(t, podExists(t, client, name), "%s evicted by a rule held mid-way", name)
		}
		assert.Equal(t, "TooManyPods", ruleCondition(t, client, "pool").Reason)

		require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, "p2", metav1.DeleteOptions{}))
		synctest.Wait()
		assert.False(t, podExists(t, client, "p0"), "released: p0's overdue countdown did not end")
		assert.False(t, podExists(t, client, "p1"), "released: p1's overdue countdown did not end")
	})
}

// A terminating pod counts toward a rule's guard until it is gone: it
// still holds its device (its claim stays reserved for it), and the
// evictions a rule starts must not make room for more. A held rule stays
// held while one of its pods terminates, and is released once it has left.
func TestRunDeviceRuleGuardCountsTerminatingPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, _ := startHeldRule(t)
		ctx := context.Background()
		require.Equal(t, "TooManyPods", ruleCondition(t, client, "everything").Reason)

		// p2 terminating: its containers stopping, its claim still reserved.
		p2, err := client.CoreV1().Pods("default").Get(ctx, "p2", metav1.GetOptions{})
		require.NoError(t, err)
		p2.DeletionTimestamp = ptr.To(metav1.NewTime(time.Now()))
		_, err = client.CoreV1().Pods("default").Update(ctx, p2, metav1.UpdateOptions{})
		require.NoError(t, err)
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, name := range []string{"p0", "p1"} {
			assert.True(t, podExists(t, client, name), "%s evicted while the rule's third pod terminates", name)
		}
		cond := ruleCondition(t, client, "everything")
		assert.Equal(t, "TooManyPods", cond.Reason)
		assert.Contains(t, cond.Message, "3 pods would be evicted")

		// Gone: 2 pods, within the limit.
		require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, "p2", metav1.DeleteOptions{}))
		synctest.Wait()
		assert.False(t, podExists(t, client, "p0"), "released: p0 not evicted")
		assert.False(t, podExists(t, client, "p1"), "released: p1 not evicted")
	})
}
