package tolerations_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/tolerations"
)

var (
	taintTime = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	gpu0      = tolerations.DeviceID{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}
	gpu1      = tolerations.DeviceID{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1"}
)

func deviceTaint(key, value string, effect resourcev1.DeviceTaintEffect, added time.Time) tolerations.DeviceTaint {
	t := tolerations.DeviceTaint{DeviceTaint: resourcev1.DeviceTaint{Key: key, Value: value, Effect: effect}}
	if !added.IsZero() {
		t.TimeAdded = &metav1.Time{Time: added}
	}
	return t
}

func deviceToleration(key string, op resourcev1.DeviceTolerationOperator, value string, effect resourcev1.DeviceTaintEffect, seconds *int64) resourcev1.DeviceToleration {
	return resourcev1.DeviceToleration{Key: key, Operator: op, Value: value, Effect: effect, TolerationSeconds: seconds}
}

const noExecute = resourcev1.DeviceTaintEffectNoExecute

func TestToleratesDeviceTaint(t *testing.T) {
	taint := resourcev1.DeviceTaint{Key: "k", Value: "v", Effect: noExecute}
	for _, tc := range []struct {
		name string
		tol  resourcev1.DeviceToleration
		want bool
	}{
		{"equal key value effect", deviceToleration("k", "Equal", "v", noExecute, nil), true},
		{"empty operator means Equal", deviceToleration("k", "", "v", noExecute, nil), true},
		{"other value", deviceToleration("k", "Equal", "w", noExecute, nil), false},
		{"exists any value", deviceToleration("k", "Exists", "", noExecute, nil), true},
		{"other key", deviceToleration("j", "Exists", "", noExecute, nil), false},
		{"empty key exists matches all", deviceToleration("", "Exists", "", "", nil), true},
		{"empty effect matches NoExecute", deviceToleration("k", "Equal", "v", "", nil), true},
		{"other effect", deviceToleration("k", "Equal", "v", resourcev1.DeviceTaintEffectNoSchedule, nil), false},
		{"unknown operator", deviceToleration("k", "Lt", "v", noExecute, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tolerations.ToleratesDeviceTaint(&tc.tol, &taint))
		})
	}
	assert.False(t, tolerations.ToleratesDeviceTaint(nil, &taint))
	assert.False(t, tolerations.ToleratesDeviceTaint(&resourcev1.DeviceToleration{Operator: "Exists"}, nil))
}

// TestDecideDevices has the cases of Kubernetes' device-taint-eviction
// controller, written from its behaviour, with the pod bound before the
// taint (so the binding does not matter), and the two on purpose different
// (marked "differs").
func TestDecideDevices(t *testing.T) {
	now := taintTime.Add(10 * time.Second)
	bound := taintTime.Add(-time.Hour)
	tainted := func(tols []resourcev1.DeviceToleration, taints ...tolerations.DeviceTaint) []tolerations.Device {
		return []tolerations.Device{{ID: gpu0, Tolerations: tols, Taints: taints}}
	}
	evicting := deviceTaint("example.com/broken", "true", noExecute, taintTime)
	other := deviceTaint("example.com/other", "", noExecute, taintTime)
	byRule := evicting
	byRule.Rule = "broken-gpus"
	type want struct {
		action      tolerations.Action
		at          time.Time
		untolerated bool
		rule        string
	}
	for _, tc := range []struct {
		name    string
		devices []tolerations.Device
		boundAt time.Time
		want    want
	}{
		{"no devices", nil, bound, want{}},
		{"untainted device", tainted(nil), bound, want{}},
		{"slice taint, no toleration: now", tainted(nil, evicting), bound, want{tolerations.EvictNow, taintTime, true, ""}},
		{"rule taint, no toleration: now, names the rule", tainted(nil, byRule), bound, want{tolerations.EvictNow, taintTime, true, "broken-gpus"}},
		{"None effect ignored", tainted(nil, deviceTaint("k", "", resourcev1.DeviceTaintEffectNone, taintTime)), bound, want{}},
		{"NoSchedule ignored", tainted(nil, deviceTaint("k", "", resourcev1.DeviceTaintEffectNoSchedule, taintTime)), bound, want{}},
		{"unknown effect ignored", tainted(nil, deviceTaint("k", "", "NoExecuteSoon", taintTime)), bound, want{}},
		{"tolerated 60 s: TimeAdded + 60 s", tainted([]resourcev1.DeviceToleration{
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](60)),
		}, evicting), bound, want{tolerations.EvictAt, taintTime.Add(60 * time.Second), false, ""}},
		{"the smallest of the matching seconds", tainted([]resourcev1.DeviceToleration{
			deviceToleration("example.com/other", "Equal", "true", noExecute, ptr.To[int64](20)),
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](60)),
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](30)),
		}, evicting), bound, want{tolerations.EvictAt, taintTime.Add(30 * time.Second), false, ""}},
		{"toleration of another key: now", tainted([]resourcev1.DeviceToleration{
			deviceToleration("example.com/other", "Equal", "true", noExecute, ptr.To[int64](60)),
		}, evicting), bound, want{tolerations.EvictNow, taintTime, true, ""}},
		{"nil seconds: forever", tainted([]resourcev1.DeviceToleration{
			deviceToleration("", "Exists", "", noExecute, nil),
		}, evicting), bound, want{}},
		{"any matching nil seconds wins over a timed one", tainted([]resourcev1.DeviceToleration{
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](60)),
			deviceToleration("", "Exists", "", noExecute, nil),
		}, evicting), bound, want{}},
		{"one of two taints tolerated: the other evicts", tainted([]resourcev1.DeviceToleration{
			deviceToleration("example.com/broken", "Exists", "", noExecute, nil),
		}, evicting, other), bound, want{tolerations.EvictNow, taintTime, true, ""}},
		{"negative seconds count as 0", tainted([]resourcev1.DeviceToleration{
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](-5)),
		}, evicting), bound, want{tolerations.EvictNow, taintTime, false, ""}},
		{"differs: an empty-effect toleration tolerates NoExecute", tainted([]resourcev1.DeviceToleration{
			deviceToleration("example.com/broken", "Exists", "", "", ptr.To[int64](60)),
		}, evicting), bound, want{tolerations.EvictAt, taintTime.Add(60 * time.Second), false, ""}},
		{"differs: a pod bound after the taint gets its full toleration", tainted([]resourcev1.DeviceToleration{
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](30)),
		}, evicting), taintTime.Add(5 * time.Second), want{tolerations.EvictAt, taintTime.Add(35 * time.Second), false, ""}},
		{"untolerated, bound after the taint: due at the binding", tainted(nil, evicting), taintTime.Add(5 * time.Second),
			want{tolerations.EvictNow, taintTime.Add(5 * time.Second), true, ""}},
		{"no TimeAdded counts from now", tainted([]resourcev1.DeviceToleration{
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](30)),
		}, deviceTaint("k", "", noExecute, time.Time{})), bound, want{tolerations.EvictAt, now.Add(30 * time.Second), false, ""}},
		{"unknown binding counts from now", tainted([]resourcev1.DeviceToleration{
			deviceToleration("", "Exists", "", noExecute, ptr.To[int64](30)),
		}, evicting), time.Time{}, want{tolerations.EvictAt, now.Add(30 * time.Second), false, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tolerations.DecideDevices(tc.devices, tc.boundAt, now)
			assert.Equal(t, tc.want.action, d.Action, "%v", d)
			assert.True(t, tc.want.at.Equal(d.At), "At %v, want %v", d.At, tc.want.at)
			assert.Equal(t, tc.want.untolerated, d.Untolerated)
			if tc.want.action != tolerations.Never {
				assert.Equal(t, gpu0, d.Device)
				assert.Equal(t, tc.want.rule, d.Rule)
				assert.Equal(t, v1.TaintEffectNoExecute, d.Taint.Effect)
			} else {
				assert.Equal(t, tolerations.Decision{}, d)
			}
		})
	}
}

func TestDecideDevicesEarliestDevice(t *testing.T) {
	now := taintTime
	tol := func(s int64) []resourcev1.DeviceToleration {
		return []resourcev1.DeviceToleration{deviceToleration("", "Exists", "", noExecute, ptr.To(s))}
	}
	devices := []tolerations.Device{
		{ID: gpu0, Tolerations: tol(90), Taints: []tolerations.DeviceTaint{deviceTaint("a", "", noExecute, taintTime)}},
		{ID: gpu1, Tolerations: tol(40), Taints: []tolerations.DeviceTaint{deviceTaint("b", "", noExecute, taintTime)}},
	}
	d := tolerations.DecideDevices(devices, time.Time{}, now)
	assert.Equal(t, tolerations.EvictAt, d.Action)
	assert.Equal(t, taintTime.Add(40*time.Second), d.At)
	assert.Equal(t, gpu1, d.Device)
	assert.Equal(t, "b", d.Taint.Key)
	assert.Equal(t, tolerations.Decision{}, tolerations.DecideDevices(devices, time.Time{}, time.Time{}), "a zero now evicts nothing")
}

func TestDecisionStringNamesDeviceAndRule(t *testing.T) {
	taint := deviceTaint("example.com/broken", "", noExecute, taintTime)
	taint.Rule = "broken-gpus"
	d := tolerations.DecideDevices([]tolerations.Device{{ID: gpu0, Taints: []tolerations.DeviceTaint{taint}}}, time.Time{}, taintTime)
	assert.Equal(t, "EvictNow (device taint example.com/broken:NoExecute on gpu.example.com/node-1/gpu-0 from rule broken-gpus not tolerated)", d.String())
}

func TestEarliest(t *testing.T) {
	early := tolerations.Decision{Action: tolerations.EvictAt, At: taintTime}
	late := tolerations.Decision{Action: tolerations.EvictAt, At: taintTime.Add(time.Second), Device: gpu0}
	never := tolerations.Decision{}
	assert.Equal(t, early, tolerations.Earliest(early, late))
	assert.Equal(t, early, tolerations.Earliest(late, early))
	assert.Equal(t, late, tolerations.Earliest(never, late), "Never does not cancel an eviction")
	assert.Equal(t, late, tolerations.Earliest(late, never))
	assert.Equal(t, never, tolerations.Earliest(never, never))
	tie := late
	tie.At = early.At
	assert.Equal(t, early, tolerations.Earliest(early, tie), "a tie keeps the first")
}

func TestDecisionCause(t *testing.T) {
	assert.Equal(t, "", tolerations.Decision{}.Cause())
	node := tolerations.Decision{Action: tolerations.EvictNow, Taint: v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute}}
	assert.Equal(t, "taint k=v:NoExecute", node.Cause())
	dev := node
	dev.Device = gpu0
	assert.Equal(t, "device taint k=v:NoExecute on gpu.example.com/node-1/gpu-0", dev.Cause())
	dev.Rule = "r"
	assert.Equal(t, "device taint k=v:NoExecute on gpu.example.com/node-1/gpu-0 from rule r", dev.Cause())
}
