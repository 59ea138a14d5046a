package devicetaints_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/devicetaints"
	"github.com/taintkit/taintkit/tolerations"
)

var (
	taintTime = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	gpu0      = tolerations.DeviceID{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}
	gpu1      = tolerations.DeviceID{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1"}
)

const noExecute = resourcev1.DeviceTaintEffectNoExecute

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

func TestTrackerNewestGenerationOnly(t *testing.T) {
	x := devicetaints.New()
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

func TestTrackerUntaintedUpdateChangesNothing(t *testing.T) {
	x := devicetaints.New()
	x.ObserveSlice(resourceSlice("s", 1, taintedDevice("gpu-0")))
	assert.False(t, x.ObserveSlice(resourceSlice("s", 1, taintedDevice("gpu-0"), taintedDevice("gpu-1"))))
}

func TestTrackerRules(t *testing.T) {
	x := devicetaints.New()
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

func TestRuleSelects(t *testing.T) {
	assert.False(t, devicetaints.RuleSelects(nil, gpu0), "no selector selects nothing")
	assert.True(t, devicetaints.RuleSelects(&resourcev1.DeviceTaintSelector{}, gpu0), "the empty selector selects every device")
	assert.True(t, devicetaints.RuleSelects(&resourcev1.DeviceTaintSelector{Driver: ptr.To(gpu0.Driver), Pool: ptr.To(gpu0.Pool)}, gpu0))
	assert.False(t, devicetaints.RuleSelects(&resourcev1.DeviceTaintSelector{Pool: ptr.To("node-2")}, gpu0))
	assert.False(t, devicetaints.RuleSelects(&resourcev1.DeviceTaintSelector{Driver: ptr.To(gpu0.Driver), Device: ptr.To("gpu-1")}, gpu0))
	assert.True(t, devicetaints.RuleSelects(&resourcev1.DeviceTaintSelector{Device: ptr.To("gpu-0")}, gpu0))
}
