package tolerations_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/tolerations"
)

// The README's device taints: README.md quotes this body verbatim, and the
// root package's TestReadmeCodeIsTested fails if the two drift apart.
func Example_deviceTaints() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	countdowns := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	devices := tolerations.NewDeviceTaints() // fed by ResourceSlice and DeviceTaintRule informers

	// An admin drains one pool's GPUs for a driver upgrade.
	devices.ObserveRule(&resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-node-a"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Pool: ptr.To("node-a")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/upgrade", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}},
		},
	})

	// The pod's claim got gpu-0 with a toleration of an empty effect: the
	// scheduler allocates with it, so it tolerates NoExecute here too.
	twoMinutes := int64(120)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train", UID: "4d2a"},
		Spec: v1.PodSpec{NodeName: "node-a", ResourceClaims: []v1.PodResourceClaim{
			{Name: "gpu", ResourceClaimName: ptr.To("train-gpu")},
		}},
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train-gpu"},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: "gpu.example.com", Pool: "node-a", Device: "gpu-0",
					Tolerations: []resourcev1.DeviceToleration{{Key: "example.com/upgrade", Operator: resourcev1.DeviceTolerationOpExists, TolerationSeconds: &twoMinutes}},
				}},
			}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "train", UID: "4d2a"}},
		},
	}
	fmt.Println("claims:", tolerations.PodClaimNames(nil, pod))

	// One decision of the node's taints and the devices': the node is fine.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	allocated := tolerations.AppendClaimDevices(nil, claim, pod.UID, devices.Taints)
	fmt.Println(countdowns.DecideWithDevices(node, pod, allocated))
	// Output:
	// claims: [train-gpu]
	// EvictAt 2025-01-01T00:02:00Z (device taint example.com/upgrade:NoExecute on gpu.example.com/node-a/gpu-0 from rule upgrade-node-a)
}
