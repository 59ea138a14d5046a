package tolerations_test

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/tolerations"
)

// FuzzDecideDevices checks DecideDevices against a model written from its
// documented rule, one taint at a time: each NoExecute taint's end is
// max(TimeAdded, binding) plus the smallest seconds of the tolerations that
// match it (the matching oracle is resourceclaim.ToleratesTaint, in
// bench/upstream's FuzzToleratesDeviceTaint), none if one is untimed; the
// decision's At is the earliest end. The fuzzer picks, from its bytes, two
// devices' taints and tolerations over a small alphabet, so that matches are
// common. Seeds are in testdata/fuzz/FuzzDecideDevices.
func FuzzDecideDevices(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, int64(30), int64(5))
	f.Add([]byte{3, 3, 0, 1, 7, 2, 9, 9, 1, 0, 4}, int64(-3), int64(-100))
	f.Fuzz(func(t *testing.T, spec []byte, boundOffset, addedOffset int64) {
		base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		now := base.Add(100 * time.Second)
		boundAt := base.Add(time.Duration(boundOffset%200) * time.Second)
		keys := []string{"", "a", "b"}
		values := []string{"", "x"}
		effects := []resourcev1.DeviceTaintEffect{"", resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNone, resourcev1.DeviceTaintEffectNoSchedule}
		ops := []resourcev1.DeviceTolerationOperator{"", resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists, "Gt"}
		next := func() int {
			if len(spec) == 0 {
				return 0
			}
			b := int(spec[0])
			spec = spec[1:]
			return b
		}
		var devices []tolerations.Device
		for d := range 2 {
			dev := tolerations.Device{ID: tolerations.DeviceID{Driver: "d", Pool: "p", Device: string(rune('0' + d))}}
			for i := next() % 3; i > 0; i-- {
				added := &metav1.Time{Time: base.Add(time.Duration((addedOffset+int64(next()))%150) * time.Second)}
				if next()%5 == 0 {
					added = nil
				}
				dev.Taints = append(dev.Taints, tolerations.DeviceTaint{DeviceTaint: resourcev1.DeviceTaint{
					Key: keys[1+next()%2], Value: values[next()%2], Effect: effects[1+next()%3], TimeAdded: added,
				}})
			}
			for i := next() % 4; i > 0; i-- {
				tol := resourcev1.DeviceToleration{Key: keys[next()%3], Operator: ops[next()%4], Value: values[next()%2], Effect: effects[next()%2]}
				if s := next(); s%4 != 0 {
					secs := int64(s%90) - 10
					tol.TolerationSeconds = &secs
				}
				dev.Tolerations = append(dev.Tolerations, tol)
			}
			devices = append(devices, dev)
		}

		got := tolerations.DecideDevices(devices, boundAt, now)
		wantAt, any, untolerated := modelDeviceDeadline(devices, boundAt, now)
		if !any {
			if got != (tolerations.Decision{}) {
				t.Fatalf("DecideDevices = %v, want Never for %+v", got, devices)
			}
			return
		}
		if !got.At.Equal(wantAt) {
			t.Fatalf("DecideDevices At = %v, want %v for %+v", got.At, wantAt, devices)
		}
		if got.Untolerated != untolerated {
			t.Fatalf("DecideDevices Untolerated = %v, want %v", got.Untolerated, untolerated)
		}
		wantAction := tolerations.EvictAt
		if untolerated || !wantAt.After(now) {
			wantAction = tolerations.EvictNow
		}
		if got.Action != wantAction {
			t.Fatalf("DecideDevices Action = %v, want %v", got.Action, wantAction)
		}
	})
}

// modelDeviceDeadline is the rule, spelt out one taint at a time.
func modelDeviceDeadline(devices []tolerations.Device, boundAt, now time.Time) (at time.Time, any, untolerated bool) {
	for _, dev := range devices {
		for _, taint := range dev.Taints {
			if taint.Effect != resourcev1.DeviceTaintEffectNoExecute {
				continue
			}
			start := now
			if taint.TimeAdded != nil && !taint.TimeAdded.After(now) {
				start = taint.TimeAdded.Time
			}
			if !boundAt.IsZero() && !boundAt.After(now) && boundAt.After(start) {
				start = boundAt
			} else if boundAt.IsZero() || boundAt.After(now) {
				start = now
			}
			matched, forever := false, false
			least := int64(1 << 62)
			for _, tol := range dev.Tolerations {
				keyOK := tol.Key == "" || tol.Key == taint.Key
				effectOK := tol.Effect == "" || tol.Effect == taint.Effect
				valueOK := tol.Operator == resourcev1.DeviceTolerationOpExists ||
					(tol.Operator == "" || tol.Operator == resourcev1.DeviceTolerationOpEqual) && tol.Value == taint.Value
				if !keyOK || !effectOK || !valueOK {
					continue
				}
				matched = true
				if tol.TolerationSeconds == nil {
					forever = true
					break
				}
				least = min(least, max(*tol.TolerationSeconds, 0))
			}
			if forever {
				continue
			}
			end := start
			if matched {
				end = start.Add(time.Duration(least) * time.Second)
			} else {
				untolerated = true
			}
			if !any || end.Before(at) {
				at, any = end, true
			}
		}
	}
	return at, any, untolerated
}
