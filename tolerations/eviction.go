package tolerations

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ReasonDeletionByTaintManager is the [v1.DisruptionTarget] condition reason
// Kubernetes' taint-eviction controller sets before deleting a pod.
const ReasonDeletionByTaintManager = "DeletionByTaintManager"

// EventReasonTaintManagerEviction is the reason of the taint manager's events.
const EventReasonTaintManagerEviction = "TaintManagerEviction"

// Action is what a [Decision] tells a controller to do with a pod.
type Action int

const (
	Never    Action = iota // cancel any scheduled eviction
	EvictAt                // evict at Decision.At, after now
	EvictNow               // evict at once
)

// String returns the constant's name, or "Action(n)".
func (a Action) String() string {
	switch a {
	case Never:
		return "Never"
	case EvictAt:
		return "EvictAt"
	case EvictNow:
		return "EvictNow"
	default:
		return fmt.Sprintf("Action(%d)", int(a))
	}
}

// Decision is the outcome of [Decide]. The zero Decision is Never.
type Decision struct {
	Action Action
	// At is when the pod is due: the earliest end of a countdown (an
	// untolerated taint's ends as it starts), not the time of the call, so
	// deciding again with nothing changed gives the same At, EvictNow
	// included. Zero if Never.
	At          time.Time
	Taint       v1.Taint // the first untolerated taint, or the first whose toleration ends first
	Untolerated bool     // no toleration tolerates Taint
	Device      DeviceID // the device whose taint Taint is; zero for a node's taint
	Rule        string   // the DeviceTaintRule that put Taint on Device, if any
}

// String describes the decision for logs and events, such as
// "EvictAt 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)",
// the action, the time unless untolerated, and [Decision.Cause].
func (d Decision) String() string {
	switch {
	case d.Action == Never:
		return "Never"
	case d.Untolerated:
		return fmt.Sprintf("%v (%s not tolerated)", d.Action, d.Cause())
	default:
		return fmt.Sprintf("%v %s (%s)", d.Action, d.At.Format(time.RFC3339Nano), d.Cause())
	}
}

// Cause names the taint that decided ("" for Never) as kubectl writes it,
// with a device's and any rule's name: "taint k:NoExecute", "device taint
// k:NoExecute on gpu.example.com/node-1/gpu-0 from rule r".
func (d Decision) Cause() string {
	if d.Action == Never {
		return ""
	}
	if d.Device == (DeviceID{}) {
		return "taint " + taintString(&d.Taint)
	}
	s := "device taint " + taintString(&d.Taint) + " on " + d.Device.String()
	if d.Rule != "" {
		s += " from rule " + d.Rule
	}
	return s
}

// taintString formats a taint as kubectl does: key[=value]:effect.
func taintString(t *v1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// Decide decides when to evict a pod with tolerations from a node with
// taints, matching as Kubernetes does ([Matcher.Decide]).
func Decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time) Decision {
	return Matcher{}.Decide(taints, tolerations, boundAt, now)
}

// Decide decides whether and when to evict a pod with tolerations, bound at
// boundAt ([PodBoundAt]), from a node with taints. Each NoExecute taint's
// countdown starts at max(taint.TimeAdded, boundAt) and runs for the
// TolerationSeconds of the first toleration that tolerates it (nil: forever;
// none: no time, so it ends as it starts). At is the earliest end: EvictNow
// if at or before now, else EvictAt; Never if none ends, or if now is zero.
// A taint no toleration tolerates makes it EvictNow, with Taint the first
// such and Untolerated set. So a restarted controller gets the same At, and
// a pod arriving on a node tainted long ago gets its full time. An unknown
// time (zero boundAt, nil TimeAdded) or one after now counts as now, which
// delays an eviction, never hastens it; to decide again later, use
// [Countdowns], or the countdown restarts at every call. With every time
// unknown, At is now + [MinTolerationTime], the Kubernetes rule.
func (m Matcher) Decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time) Decision {
	d, _ := m.decideFromStarts(taints, tolerations, boundAt, now, nil)
	return d
}

// decideFromStarts is the rule of [Matcher.Decide], with the start of a
// NoExecute taint taken from the taint of the same key and effect in starts,
// if there is one (its TimeAdded is the start: [Countdowns] remembers them),
// and also returns the index in taints of the taint whose countdown ends at
// At, or -1.
func (m Matcher) decideFromStarts(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time, starts []v1.Taint) (Decision, int) {
	if now.IsZero() {
		// An unset now is a caller's bug, not a moment in year 1: every
		// deadline would be in the past, so refuse to evict rather than evict.
		return Decision{}, -1
	}
	bound := pastOrNow(boundAt, now)
	var d Decision // Never
	due := -1
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != v1.TaintEffectNoExecute {
			continue
		}
		j := m.firstTolerating(taint, tolerations)
		if j >= 0 && tolerations[j].TolerationSeconds == nil {
			continue // tolerated forever: no deadline
		}
		end := latest(pastOrNow(taintStart(taint, starts), now), bound)
		switch {
		case j < 0:
			if !d.Untolerated {
				d.Taint, d.Untolerated = *taint, true
			}
		case *tolerations[j].TolerationSeconds > 0:
			end = end.Add(secondsToDuration(*tolerations[j].TolerationSeconds))
		}
		if due < 0 || end.Before(d.At) {
			d.At, due = end, i
			if !d.Untolerated {
				d.Taint = *taint
			}
		}
	}
	switch {
	case due < 0:
		return Decision{}, -1
	case d.Untolerated || !d.At.After(now):
		d.Action = EvictNow
	default:
		d.Action = EvictAt
	}
	return d, due
}

// taintStart returns when the countdown of taint, a NoExecute taint, started:
// the TimeAdded of the taint of its key and effect in starts if there is
// one, else its own TimeAdded, else the zero Time (unknown).
func taintStart(taint *v1.Taint, starts []v1.Taint) time.Time {
	if j := findTaint(starts, taint.Key, taint.Effect); j >= 0 {
		return starts[j].TimeAdded.Time
	}
	if taint.TimeAdded != nil {
		return taint.TimeAdded.Time
	}
	return time.Time{}
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pastOrNow returns t if it is known (not zero) and not after now, else now:
// an unknown start, or one after now (clock skew), counts as now.
func pastOrNow(t, now time.Time) time.Time {
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

// PodBoundAt returns the time of pod's True PodScheduled condition, set by
// the API server like a taint's TimeAdded, and true; or the zero Time and false.
func PodBoundAt(pod *v1.Pod) (time.Time, bool) {
	if pod == nil {
		return time.Time{}, false
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != v1.PodScheduled {
			continue
		}
		if c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero() {
			return time.Time{}, false
		}
		return c.LastTransitionTime.Time, true
	}
	return time.Time{}, false
}
