package tolerations_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/tolerations"
)

// The README's quick start: README.md quotes this body verbatim, and the root
// package's TestReadmeCodeIsTested fails if the two drift apart.
func Example_quickStart() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	node := v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}, // keeps new pods off; never evicts
		{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}},
	}}}
	pod := v1.Pod{
		Spec: v1.PodSpec{Tolerations: tolerations.WithDefaultTolerations(nil)}, // 300 s for not-ready and unreachable
		Status: v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0.Add(-time.Hour)}},
		}},
	}

	// Only NoExecute taints evict: match those, not every taint of the node.
	taints := tolerations.GetNoExecuteTaints(node.Spec.Taints)
	if taint, found := tolerations.FirstUntoleratedTaint(taints, pod.Spec.Tolerations); found {
		fmt.Println("evict now:", taint.Key, "is not tolerated")
	}
	ok, used := tolerations.GetMatchingTolerations(taints, pod.Spec.Tolerations)
	fmt.Println("tolerated:", ok, "for", tolerations.MinTolerationTime(used))

	// When to evict, counted from when the taint was added (or the pod bound):
	// a restarted controller gets the same answer.
	boundAt, _ := tolerations.PodBoundAt(&pod)
	now := t0.Add(time.Minute) // time.Now() in a controller
	switch d := tolerations.Decide(node.Spec.Taints, pod.Spec.Tolerations, boundAt, now); d.Action {
	case tolerations.EvictNow:
		fmt.Println("delete the pod now:", d)
	case tolerations.EvictAt: // e.g. a timedqueue's AddWork(pod, now, d.At)
		fmt.Println("schedule the deletion:", d)
	case tolerations.Never:
		fmt.Println("cancel any scheduled deletion")
	}
	// Output:
	// tolerated: true for 5m0s
	// schedule the deletion: EvictAt 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)
}
