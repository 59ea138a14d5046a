package tolerations_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/tolerations"
)

// Device taints (DRA): a pod's devices, each with the tolerations of its
// allocation and the taints it has now, decided together with its node's
// taints, so that neither cancels the other. Which claims are a pod's and
// which taints a device has is the controller's to read.
func Example_deviceTaints() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	countdowns := tolerations.NewCountdowns(clk, tolerations.Matcher{})

	// The pod's claim got gpu-0 with a toleration of an empty effect (the
	// claim's status.allocation): the scheduler allocates with it, so it
	// tolerates NoExecute here too. An admin drains the pool for a driver
	// upgrade with a DeviceTaintRule. The controller reads which claims are
	// the pod's and which taints their devices have.
	twoMinutes := int64(120)
	gpu := tolerations.Device{
		ID:          tolerations.DeviceID{Driver: "gpu.example.com", Pool: "node-a", Device: "gpu-0"},
		Tolerations: []resourcev1.DeviceToleration{{Key: "example.com/upgrade", Operator: resourcev1.DeviceTolerationOpExists, TolerationSeconds: &twoMinutes}},
		Taints: []tolerations.DeviceTaint{{
			DeviceTaint: resourcev1.DeviceTaint{Key: "example.com/upgrade", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}},
			Rule:        "upgrade-node-a",
		}},
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train", UID: "4d2a"},
		Spec:       v1.PodSpec{NodeName: "node-a"},
	}

	// One decision of the node's taints and the devices': the node is fine.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	fmt.Println(countdowns.DecideWithDevices(node, pod, []tolerations.Device{gpu}))
	// Output:
	// EvictAt 2025-01-01T00:02:00Z (device taint example.com/upgrade:NoExecute on gpu.example.com/node-a/gpu-0 from rule upgrade-node-a)
}
