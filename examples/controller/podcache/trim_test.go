package podcache_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/podcache"
	"github.com/taintkit/taintkit/tolerations"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// fullPod is a pod as an informer lists it: everything a workload carries,
// most of which no eviction decision reads.
func fullPod(name string, tols []v1.Toleration, conditions ...v1.PodCondition) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: "uid-1", ResourceVersion: "42",
			Labels:      map[string]string{"app": "web", "pod-template-hash": "5d8f"},
			Annotations: map[string]string{"example.com/config": strings.Repeat("x", 512)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs-uid", Controller: ptr.To(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: v1.PodSpec{
			NodeName:        "node-a",
			Tolerations:     tols,
			SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To("web")},
			Containers: []v1.Container{{
				Name: "web", Image: "registry.example.com/web:1.2.3",
				Env: []v1.EnvVar{{Name: "MODE", Value: "production"}},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("web-gpu")}},
		},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			Conditions: conditions,
			PodIP:      "10.0.0.7",
			ResourceClaimStatuses: []v1.PodResourceClaimStatus{
				{Name: "gpu", ResourceClaimName: ptr.To("web-gpu")},
			},
			ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{
				ResourceClaimName: "web-extended",
				RequestMappings:   []v1.ContainerExtendedResourceRequest{{ContainerName: "web", ResourceName: "example.com/gpu", RequestName: "r0"}},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "web", Ready: true, RestartCount: 3}},
		},
	}
}

func condition(t v1.PodConditionType, status v1.ConditionStatus, at time.Time) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.NewTime(at)}
}

// A decision on a trimmed pod is the decision on the full pod, for every
// kind of toleration and start the rule distinguishes.
func TestTrimDecidesAsFullPod(t *testing.T) {
	unreachable := func(secs *int64) v1.Toleration {
		return v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: secs}
	}
	pods := map[string]*v1.Pod{
		"no tolerations":            fullPod("a", nil),
		"tolerates 60 s, bound":     fullPod("b", []v1.Toleration{unreachable(ptr.To[int64](60))}, condition(v1.PodReady, v1.ConditionTrue, t0.Add(time.Hour)), condition(v1.PodScheduled, v1.ConditionTrue, t0.Add(-time.Minute))),
		"tolerates 0 s, bound late": fullPod("c", []v1.Toleration{unreachable(ptr.To[int64](0))}, condition(v1.PodScheduled, v1.ConditionTrue, t0.Add(30*time.Second))),
		"tolerates forever":         fullPod("d", []v1.Toleration{unreachable(nil)}),
		// An unscheduled condition gives no bound time: the start is unknown.
		"not scheduled, being evicted": fullPod("e", []v1.Toleration{unreachable(ptr.To[int64](300))},
			condition(v1.PodScheduled, v1.ConditionFalse, t0), condition(v1.DisruptionTarget, v1.ConditionTrue, t0)),
	}
	taintSets := map[string][]v1.Taint{
		"none":             nil,
		"unreachable":      {{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}}},
		"unreachable, new": {{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(time.Hour)}}},
		"other key, untimed": {
			{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute},
			{Key: "example.com/drain", Value: "true", Effect: v1.TaintEffectNoExecute},
		},
		"NoSchedule only": {{Key: "example.com/x", Effect: v1.TaintEffectNoSchedule}},
	}
	for pname, pod := range pods {
		trimmed := podcache.Trim(pod)
		for tname, taints := range taintSets {
			t.Run(pname+"/"+tname, func(t *testing.T) {
				for _, now := range []time.Time{t0, t0.Add(45 * time.Second), t0.Add(2 * time.Hour)} {
					fullBound, fullOK := tolerations.PodBoundAt(pod)
					trimBound, trimOK := tolerations.PodBoundAt(trimmed)
					assert.Equal(t, fullBound, trimBound, "PodBoundAt")
					assert.Equal(t, fullOK, trimOK, "PodBoundAt ok")
					recBound, recOK := podcache.NewRecord(pod).BoundAt()
					assert.Equal(t, fullBound, recBound, "Record.BoundAt")
					assert.Equal(t, fullOK, recOK, "Record.BoundAt ok")
					want := tolerations.Decide(taints, pod.Spec.Tolerations, fullBound, now)
					got := tolerations.Decide(taints, trimmed.Spec.Tolerations, trimBound, now)
					assert.Equal(t, want, got, "Decide at %v", now.Sub(t0))
				}

				// The same through Countdowns, each fed its own copy, the
				// pod decided again after time moves.
				node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: v1.NodeSpec{Taints: taints}}
				clkFull, clkTrim := testingclock.NewFakeClock(t0), testingclock.NewFakeClock(t0)
				full := tolerations.NewCountdowns(clkFull, tolerations.Matcher{})
				trim := tolerations.NewCountdowns(clkTrim, tolerations.Matcher{})
				full.ObserveNode(node)
				trim.ObserveNode(node)
				full.ObservePod(pod)
				trim.ObservePod(trimmed)
				for _, step := range []time.Duration{0, 10 * time.Second, time.Hour} {
					clkFull.Step(step)
					clkTrim.Step(step)
					assert.Equal(t, full.Decide(node, pod), trim.Decide(node, trimmed), "Countdowns.Decide after %v", step)
					assert.Equal(t, full.Recheck(node, pod), trim.Recheck(node, trimmed), "Countdowns.Recheck after %v", step)
				}
			})
		}
	}
}

// Trim keeps what a controller reads to act on a pod and to describe it,
// and drops the rest.
func TestTrimKeeps(t *testing.T) {
	deleting := metav1.NewTime(t0)
	pod := fullPod("web", []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
		condition(v1.PodReady, v1.ConditionTrue, t0), condition(v1.PodScheduled, v1.ConditionTrue, t0),
		condition(v1.DisruptionTarget, v1.ConditionTrue, t0))
	pod.DeletionTimestamp = &deleting

	got := podcache.Trim(pod)
	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion, DeletionTimestamp: &deleting},
		Spec: v1.PodSpec{NodeName: "node-a", Tolerations: pod.Spec.Tolerations, ResourceClaims: pod.Spec.ResourceClaims,
			SchedulingGroup: pod.Spec.SchedulingGroup},
		Status: v1.PodStatus{
			Conditions:                  pod.Status.Conditions[1:],
			ResourceClaimStatuses:       pod.Status.ResourceClaimStatuses,
			ExtendedResourceClaimStatus: pod.Status.ExtendedResourceClaimStatus,
		},
	}
	assert.Equal(t, want, got)
	assert.Nil(t, podcache.Trim(nil))
	assert.Equal(t, &v1.Pod{}, podcache.Trim(&v1.Pod{}), "nothing to keep: nil slices stay nil")
}

// The trimmed pod shares no memory with the pod: changing one never changes
// the other (an informer's cache and the object a caller holds).
func TestTrimSharesNothing(t *testing.T) {
	pod := fullPod("web", []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, TolerationSeconds: ptr.To[int64](5)}},
		condition(v1.PodScheduled, v1.ConditionTrue, t0))
	deleting := metav1.NewTime(t0)
	pod.DeletionTimestamp = &deleting
	before := pod.DeepCopy()

	got := podcache.Trim(pod)
	*got.Spec.Tolerations[0].TolerationSeconds = 99
	got.Spec.Tolerations[0].Key = "changed"
	got.Status.Conditions[0].Status = v1.ConditionFalse
	got.DeletionTimestamp.Time = t0.Add(time.Hour)
	*got.Spec.ResourceClaims[0].ResourceClaimName = "changed"
	*got.Spec.SchedulingGroup.PodGroupName = "changed"
	*got.Status.ResourceClaimStatuses[0].ResourceClaimName = "changed"
	got.Status.ExtendedResourceClaimStatus.RequestMappings[0].RequestName = "changed"
	require.Equal(t, before, pod, "the pod changed with its trimmed copy")
}

func ExampleTrim() {
	pod := fullPod("web", []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}})
	trimmed := podcache.Trim(pod)
	fmt.Println(trimmed.Name, trimmed.Spec.NodeName, len(trimmed.Spec.Tolerations), len(trimmed.Spec.Containers), len(trimmed.Labels))
	// Output: web node-a 1 0 0
}
