package tolerations_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/tolerations"
)

func ExampleGetMatchingTolerations() {
	s300 := int64(300)
	taints := []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}}
	tols := []v1.Toleration{
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, TolerationSeconds: &s300},
	}
	ok, used := tolerations.GetMatchingTolerations(taints, tols)
	fmt.Println(ok, len(used), used[0].Key, *used[0].TolerationSeconds)

	taints = append(taints, v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoExecute})
	ok, used = tolerations.GetMatchingTolerations(taints, tols)
	fmt.Println(ok, len(used))
	if taint, found := tolerations.FirstUntoleratedTaint(taints, tols); found {
		fmt.Println("not tolerated:", taint.Key)
	}
	// Output:
	// true 1 node.kubernetes.io/unreachable 300
	// false 0
	// not tolerated: maintenance
}

func ExampleMinTolerationTime() {
	s60, s300 := int64(60), int64(300)
	fmt.Println(tolerations.MinTolerationTime([]v1.Toleration{{TolerationSeconds: &s300}, {TolerationSeconds: &s60}}))
	fmt.Println(tolerations.MinTolerationTime([]v1.Toleration{{TolerationSeconds: nil}}) == tolerations.Forever)
	fmt.Println(tolerations.MinTolerationTime(nil))
	// Output:
	// 1m0s
	// true
	// 0s
}

// A Matcher with ComparisonOperators honours Gt and Lt: here the pod
// tolerates nodes whose "example.com/cpu-generation" taint is above 4.
func ExampleMatcher() {
	tol := v1.Toleration{Key: "example.com/cpu-generation", Operator: v1.TolerationOpGt, Value: "4"}
	m := tolerations.Matcher{ComparisonOperators: true}
	for _, value := range []string{"6", "4", "06"} {
		taint := v1.Taint{Key: "example.com/cpu-generation", Value: value, Effect: v1.TaintEffectNoSchedule}
		fmt.Printf("%q: %v (comparison operators off: %v)\n", value, m.ToleratesTaint(&tol, &taint), tolerations.ToleratesTaint(&tol, &taint))
	}
	// Output:
	// "6": true (comparison operators off: false)
	// "4": false (comparison operators off: false)
	// "06": false (comparison operators off: false)
}

// Decide counts each taint's toleration from when the taint was added, or
// from when the pod was bound to the node if that is later, so deciding
// again after a controller restart gives the same deadline.
func ExampleDecide() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	taints := []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}}}
	tols := tolerations.WithDefaultTolerations(nil) // 300 s for unreachable
	pod := &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0.Add(-time.Hour)}},
	}}}
	boundAt, _ := tolerations.PodBoundAt(pod)

	for _, now := range []time.Time{t0.Add(10 * time.Second), t0.Add(4 * time.Minute), t0.Add(5 * time.Minute)} {
		d := tolerations.Decide(taints, tols, boundAt, now)
		fmt.Printf("at +%v: %v at +%v\n", now.Sub(t0), d.Action, d.At.Sub(t0))
	}
	d := tolerations.Decide(append(taints, v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoExecute}), tols, boundAt, t0)
	fmt.Println(d)
	// Output:
	// at +10s: EvictAt at +5m0s
	// at +4m0s: EvictAt at +5m0s
	// at +5m0s: EvictNow at +5m0s
	// EvictNow (taint maintenance:NoExecute not tolerated)
}

func ExampleWithDefaultTolerations() {
	own := []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	for _, tol := range tolerations.WithDefaultTolerations(own) {
		seconds := "forever"
		if tol.TolerationSeconds != nil {
			seconds = fmt.Sprint(*tol.TolerationSeconds, "s")
		}
		fmt.Println(tol.Key, tol.Effect, seconds)
	}
	fmt.Println(len(own))
	// Output:
	// node.kubernetes.io/not-ready NoExecute forever
	// node.kubernetes.io/unreachable NoExecute 300s
	// 1
}
