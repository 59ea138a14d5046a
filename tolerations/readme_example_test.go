package tolerations_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/tolerations"
)

// The README's quick start: README.md quotes this body verbatim, and the root
// package's TestReadmeCodeIsTested fails if the two drift apart.
func Example_quickStart() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0) // clock.RealClock{} in a controller
	countdowns := tolerations.NewCountdowns(clk, tolerations.Matcher{})

	// Neither start is recorded: the taint has no TimeAdded (kubelet's
	// --register-with-taints), the pod no PodScheduled condition (created
	// with its node name). Countdowns counts from when it first saw them.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}, // keeps new pods off; never evicts
		{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute},
	}}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "6b1f0c2e"},
		Spec:       v1.PodSpec{NodeName: "node-a", Tolerations: tolerations.WithDefaultTolerations(nil)}, // 300 s for unreachable
	}

	// Upstream's helpers. Only NoExecute taints evict: match those.
	taints := tolerations.GetNoExecuteTaints(node.Spec.Taints)
	ok, used := tolerations.GetMatchingTolerations(taints, pod.Spec.Tolerations)
	fmt.Println("tolerated:", ok, "for", tolerations.MinTolerationTime(used))

	// A controller decides again on every node and pod update (its standbys'
	// informers feed their own Countdowns with ObserveNode and ObservePod); the
	// deadline stays where first sight put it, and comes.
	for _, at := range []time.Duration{0, time.Minute, 4 * time.Minute, 5 * time.Minute} {
		clk.SetTime(t0.Add(at)) // an update arrives
		switch d := countdowns.Decide(node, pod); d.Action {
		case tolerations.EvictNow: // then, once the pod is deleted, countdowns.ObservePodDeleted(pod)
			fmt.Printf("+%v delete the pod now: %v\n", at, d)
		case tolerations.EvictAt: // e.g. a timedqueue's UpdateWork(pod, now, d.At): it schedules, or moves a schedule
			fmt.Printf("+%v schedule the deletion: %v\n", at, d)
		case tolerations.Never:
			fmt.Printf("+%v cancel any scheduled deletion\n", at)
		}
	}
	// Output:
	// tolerated: true for 5m0s
	// +0s schedule the deletion: EvictAt 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)
	// +1m0s schedule the deletion: EvictAt 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)
	// +4m0s schedule the deletion: EvictAt 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)
	// +5m0s delete the pod now: EvictNow 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)
}
