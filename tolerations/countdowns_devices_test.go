package tolerations_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/tolerations"
)

// TestDecideWithDevicesOneDecision: a pod's node taints and device taints
// make one decision, so that neither cancels the other.
func TestDecideWithDevicesOneDecision(t *testing.T) {
	clk := testingclock.NewFakeClock(taintTime)
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	pod := boundPod("p", "uid-1", "node-1", 300, taintTime.Add(-time.Hour))
	devTaint := deviceTaint("example.com/broken", "", noExecute, taintTime)
	devices := []tolerations.Device{{ID: gpu0, Tolerations: []resourcev1.DeviceToleration{
		deviceToleration("", "Exists", "", noExecute, ptr.To[int64](60)),
	}, Taints: []tolerations.DeviceTaint{devTaint}}}

	untainted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	d := c.DecideWithDevices(untainted, pod, devices)
	assert.Equal(t, tolerations.EvictAt, d.Action)
	assert.Equal(t, taintTime.Add(60*time.Second), d.At)
	assert.Equal(t, gpu0, d.Device)
	assert.Equal(t, tolerations.Never, c.Decide(untainted, pod).Action, "the node alone decides Never")

	// The node is tainted too; its countdown ends later: the device's stands.
	unreachable := untainted.DeepCopy()
	unreachable.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: taintTime}}}
	d = c.DecideWithDevices(unreachable, pod, devices)
	assert.Equal(t, taintTime.Add(60*time.Second), d.At)
	assert.Equal(t, gpu0, d.Device)

	// The device taint goes: the node's countdown decides, from its start.
	clk.Step(30 * time.Second)
	d = c.DecideWithDevices(unreachable, pod, nil)
	assert.Equal(t, taintTime.Add(300*time.Second), d.At)
	assert.Equal(t, tolerations.DeviceID{}, d.Device)
	assert.Equal(t, v1.TaintNodeUnreachable, d.Taint.Key)

	// A nil node has no taints: the devices still decide.
	d = c.DecideWithDevices(nil, pod, devices)
	assert.Equal(t, taintTime.Add(60*time.Second), d.At)
	assert.Equal(t, d, c.RecheckWithDevices(nil, pod, devices))
	assert.Equal(t, d, c.RecheckWithDevices(unreachable, pod, devices))
}

// TestDecideWithDevicesFirstSight: a pod with no PodScheduled time counts a
// device taint's countdown from its first sight, and deciding again later
// does not restart it.
func TestDecideWithDevicesFirstSight(t *testing.T) {
	clk := testingclock.NewFakeClock(taintTime.Add(time.Hour))
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	firstSight := clk.Now()
	pod := unboundPod("p", "uid-1", "node-1", -1)
	devices := []tolerations.Device{{ID: gpu0, Tolerations: []resourcev1.DeviceToleration{
		deviceToleration("", "Exists", "", noExecute, ptr.To[int64](60)),
	}, Taints: []tolerations.DeviceTaint{deviceTaint("example.com/broken", "", noExecute, taintTime)}}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}

	c.ObservePod(pod) // a standby's informer saw it first
	clk.Step(40 * time.Second)
	for range 3 {
		d := c.DecideWithDevices(node, pod, devices)
		assert.Equal(t, firstSight.Add(60*time.Second), d.At, "the countdown runs from the first sight")
		clk.Step(10 * time.Second)
	}
	d := c.DecideWithDevices(node, pod, devices)
	assert.Equal(t, tolerations.EvictNow, d.Action)
}
