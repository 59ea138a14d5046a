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

func resourceSlice(name string, generation int64, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.Spec.Driver = gpu0.Driver
	s.Spec.Pool = resourcev1.ResourcePool{Name: gpu0.Pool, Generation: generation, ResourceSliceCount: 1}
	s.Spec.Devices = devices
	return s
}

func taintedDevice(name string, taints ...resourcev1.DeviceTaint) resourcev1.Device {
	return resourcev1.Device{Name: name, Taints: taints}
}

func taintRule(name string, sel *resourcev1.DeviceTaintSelector, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	return &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: sel,
			Taint:          resourcev1.DeviceTaint{Key: "rule/" + name, Effect: effect, TimeAdded: &metav1.Time{Time: taintTime}},
		},
	}
}

func taintNames(taints []tolerations.DeviceTaint) []string {
	var out []string
	for _, t := range taints {
		out = append(out, t.Key+"@"+t.Rule)
	}
	return out
}

func TestDeviceTaintsNewestGenerationOnly(t *testing.T) {
	x := tolerations.NewDeviceTaints()
	broken := resourcev1.DeviceTaint{Key: "broken", Effect: noExecute, TimeAdded: &metav1.Time{Time: taintTime}}
	assert.True(t, x.ObserveSlice(resourceSlice("s-old", 1, taintedDevice("gpu-0", broken))))
	assert.Equal(t, []string{"broken@"}, taintNames(x.Taints(gpu0)))

	// The driver publishes generation 2 without the taint: the old slice
	// is being replaced and no longer counts.
	assert.True(t, x.ObserveSlice(resourceSlice("s-new", 2, taintedDevice("gpu-0"))), "a newer generation changes what counts")
	assert.Empty(t, x.Taints(gpu0))

	// The new slice goes away: the old generation is the newest again.
	assert.True(t, x.ForgetSlice("s-new"))
	assert.Equal(t, []string{"broken@"}, taintNames(x.Taints(gpu0)))
	assert.True(t, x.ForgetSlice("s-old"))
	assert.Empty(t, x.Taints(gpu0))
	assert.False(t, x.ForgetSlice("s-old"), "forgetting twice changes nothing")
	assert.Empty(t, x.Taints(gpu1))
}

func TestDeviceTaintsUntaintedUpdateChangesNothing(t *testing.T) {
	x := tolerations.NewDeviceTaints()
	x.ObserveSlice(resourceSlice("s", 1, taintedDevice("gpu-0")))
	assert.False(t, x.ObserveSlice(resourceSlice("s", 1, taintedDevice("gpu-0"), taintedDevice("gpu-1"))))
}

func TestDeviceTaintsRules(t *testing.T) {
	x := tolerations.NewDeviceTaints()
	x.ObserveRule(taintRule("b-pool", &resourcev1.DeviceTaintSelector{Pool: ptr.To(gpu0.Pool)}, noExecute))
	x.ObserveRule(taintRule("a-all", &resourcev1.DeviceTaintSelector{}, resourcev1.DeviceTaintEffectNone))
	x.ObserveRule(taintRule("c-none", nil, noExecute))
	x.ObserveRule(taintRule("d-gpu1", &resourcev1.DeviceTaintSelector{Device: ptr.To("gpu-1")}, noExecute))
	assert.Equal(t, []string{"rule/a-all@a-all", "rule/b-pool@b-pool"}, taintNames(x.Taints(gpu0)), "by rule name; a nil selector selects nothing")
	assert.Len(t, x.Rules(), 4)

	assert.True(t, x.Hold("b-pool", true))
	assert.False(t, x.Hold("b-pool", true))
	assert.True(t, x.Held("b-pool"))
	assert.Equal(t, []string{"rule/a-all@a-all"}, taintNames(x.Taints(gpu0)), "a held rule taints nothing")
	assert.True(t, x.Hold("b-pool", false))
	assert.Equal(t, []string{"rule/a-all@a-all", "rule/b-pool@b-pool"}, taintNames(x.Taints(gpu0)))

	x.Hold("b-pool", true)
	x.ForgetRule("b-pool")
	assert.False(t, x.Held("b-pool"), "a rule forgotten is no longer held")
	x.ObserveRule(taintRule("b-pool", &resourcev1.DeviceTaintSelector{Pool: ptr.To(gpu0.Pool)}, noExecute))
	assert.Equal(t, []string{"rule/a-all@a-all", "rule/b-pool@b-pool"}, taintNames(x.Taints(gpu0)), "a rule created again is not held")
}

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
