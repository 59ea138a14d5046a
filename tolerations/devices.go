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
	// Rule is the name of the DeviceTaintRule that taints the device, or ""
	// for a taint in the device's ResourceSlice.
	Rule string
}

// Device is a device allocated to a pod: the tolerations its claim's request
// got at allocation (status.allocation.devices.results[].tolerations) and
// the taints it has now, from its ResourceSlice and from the
// DeviceTaintRules that select it.
type Device struct {
	ID          DeviceID
	Tolerations []resourcev1.DeviceToleration
	Taints      []DeviceTaint
}

// ToleratesDeviceTaint reports whether toleration tolerates taint, exactly as
// k8s.io/dynamic-resource-allocation's resourceclaim.ToleratesTaint does:
//
//   - a non-empty toleration Effect or Key must equal the taint's;
//   - operator "" or Equal: the values must be equal; Exists: any value;
//   - any other operator, or a nil argument: no match.
//
// So a toleration with an empty effect tolerates a NoExecute taint, as it does
// when the scheduler allocates the device.
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

// DecideDevices decides whether and when to evict a pod, bound at boundAt
// ([PodBoundAt]), because of the NoExecute taints of the devices allocated to
// it. Each device's NoExecute taint (other effects, known or not, do nothing)
// has a countdown that starts at max(taint.TimeAdded, boundAt) and runs for
// the smallest TolerationSeconds (negative as 0) of the device's tolerations
// that tolerate it ([ToleratesDeviceTaint]); one of them with nil seconds
// tolerates it forever, and with none it ends as it starts. The rest is as
// [Matcher.Decide]: At is the earliest end, EvictNow if at or before now or
// if a taint is not tolerated (Untolerated, Taint the first such), else
// EvictAt; Never if none ends or now is zero. Decision.Device and
// Decision.Rule say whose taint Taint is; Taint's effect is NoExecute.
//
// Two rules differ from Kubernetes' device-taint-eviction controller on
// purpose, so that the scheduler never places a pod on a device that evicts
// it at once, again and again: a toleration with an empty effect tolerates a
// NoExecute taint (as the scheduler allocates, and as node tolerations do;
// Kubernetes counts only an effect of exactly NoExecute), and a countdown
// starts no earlier than the pod's binding (Kubernetes counts from TimeAdded
// alone, so a pod that arrives after the taint with a shorter toleration is
// evicted at once).
//
// An unknown time (zero boundAt, nil TimeAdded, which the API server always
// sets) or one after now counts as now, which delays an eviction, never
// hastens it.
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
// with the earlier At (a on a tie); else the one that evicts; else Never. It
// makes one decision of a pod's node taints and device taints, so that
// neither cancels the other.
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
