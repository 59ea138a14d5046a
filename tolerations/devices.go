package tolerations

import (
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// DeviceID names a device as an allocation result does: the driver, the
// pool and the device's name in the pool.
type DeviceID struct {
	Driver, Pool, Device string
}

// String returns "driver/pool/device", or "" for the zero DeviceID.
func (id DeviceID) String() string {
	if id == (DeviceID{}) {
		return ""
	}
	return id.Driver + "/" + id.Pool + "/" + id.Device
}

// DeviceTaint is a taint on a device and where it comes from.
type DeviceTaint struct {
	resourcev1.DeviceTaint
	Rule string // the DeviceTaintRule that taints the device; "" for its ResourceSlice's taint
}

// Device is a device allocated to a pod, with the tolerations of its
// allocation (a claim's status.allocation.devices.results[].tolerations) and
// the taints it has now, its ResourceSlice's and its DeviceTaintRules'.
type Device struct {
	ID          DeviceID
	Tolerations []resourcev1.DeviceToleration
	Taints      []DeviceTaint
}

// ToleratesDeviceTaint reports whether toleration tolerates taint as
// k8s.io/dynamic-resource-allocation's resourceclaim.ToleratesTaint does: by
// the rules of [Matcher.ToleratesTaint] without comparison operators, so a
// toleration with an empty effect tolerates every effect.
func ToleratesDeviceTaint(toleration *resourcev1.DeviceToleration, taint *resourcev1.DeviceTaint) bool {
	if toleration == nil || taint == nil {
		return false
	}
	if toleration.Key != "" && toleration.Key != taint.Key {
		return false
	}
	if toleration.Effect != "" && toleration.Effect != taint.Effect {
		return false
	}
	switch toleration.Operator {
	case "", resourcev1.DeviceTolerationOpEqual:
		return toleration.Value == taint.Value
	case resourcev1.DeviceTolerationOpExists:
		return true
	default:
		return false
	}
}

// DecideDevices decides whether and when to evict a pod, bound at boundAt,
// for the NoExecute taints of the devices allocated to it (other effects do
// nothing), by the rule of [Matcher.Decide] (starts, unknown times, At,
// Action, Untolerated), except that a device's taint counts down the
// smallest TolerationSeconds (negative as 0) of the device's tolerations
// that tolerate it ([ToleratesDeviceTaint]), or none if one of them has nil
// seconds.
//
// Two rules differ from Kubernetes' device-taint-eviction controller on
// purpose, so that the scheduler never places a pod on a device that evicts
// it at once, again and again: a toleration with an empty effect tolerates a
// NoExecute taint (as the scheduler allocates; Kubernetes evicts unless the
// effect is exactly NoExecute), and a countdown starts no earlier than the
// pod's binding (Kubernetes counts from TimeAdded alone, so a pod that
// arrives after the taint with a shorter toleration is evicted at once).
func DecideDevices(devices []Device, boundAt, now time.Time) Decision {
	if now.IsZero() {
		return Decision{}
	}
	bound := pastOrNow(boundAt, now)
	var d Decision
	found := false
	for i := range devices {
		dev := &devices[i]
		for j := range dev.Taints {
			taint := &dev.Taints[j]
			if taint.Effect != resourcev1.DeviceTaintEffectNoExecute {
				continue
			}
			seconds, tolerated, forever := deviceTolerationSeconds(dev.Tolerations, &taint.DeviceTaint)
			if forever {
				continue
			}
			var added time.Time
			if taint.TimeAdded != nil {
				added = taint.TimeAdded.Time
			}
			end := latest(pastOrNow(added, now), bound)
			if tolerated {
				end = end.Add(secondsToDuration(seconds))
			}
			untolerated := !tolerated && !d.Untolerated
			if untolerated || !d.Untolerated && (!found || end.Before(d.At)) {
				d.Taint, d.Device, d.Rule = nodeTaintOf(&taint.DeviceTaint), dev.ID, taint.Rule
				d.Untolerated = !tolerated
			}
			if !found || end.Before(d.At) {
				d.At, found = end, true
			}
		}
	}
	switch {
	case !found:
		return Decision{}
	case d.Untolerated || !d.At.After(now):
		d.Action = EvictNow
	default:
		d.Action = EvictAt
	}
	return d
}

// deviceTolerationSeconds returns the smallest TolerationSeconds, negative as
// 0, of the tolerations that tolerate taint, and whether there is one; or
// forever if one of them has none.
func deviceTolerationSeconds(tolerations []resourcev1.DeviceToleration, taint *resourcev1.DeviceTaint) (seconds int64, tolerated, forever bool) {
	for i := range tolerations {
		t := &tolerations[i]
		if !ToleratesDeviceTaint(t, taint) {
			continue
		}
		if t.TolerationSeconds == nil {
			return 0, true, true
		}
		s := max(*t.TolerationSeconds, 0)
		if !tolerated || s < seconds {
			seconds = s
		}
		tolerated = true
	}
	return seconds, tolerated, false
}

// nodeTaintOf returns taint as a Decision's Taint: its key, value, effect
// and TimeAdded.
func nodeTaintOf(taint *resourcev1.DeviceTaint) v1.Taint {
	return v1.Taint{Key: taint.Key, Value: taint.Value, Effect: v1.TaintEffect(taint.Effect), TimeAdded: taint.TimeAdded}
}

// Earliest returns the decision that evicts first: of two that evict, the one
// with the earlier At (a on a tie); else the one that evicts; else Never.
func Earliest(a, b Decision) Decision {
	switch {
	case b.Action == Never:
		return a
	case a.Action == Never || b.At.Before(a.At):
		return b
	default:
		return a
	}
}
