package tolerations

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ReasonDeletionByTaintManager is the [v1.DisruptionTarget] condition reason
// Kubernetes' taint-eviction controller sets before deleting a pod; set it too.
const ReasonDeletionByTaintManager = "DeletionByTaintManager"

// EventReasonTaintManagerEviction is the reason of the events Kubernetes'
// taint-eviction controller records about a pod's deletion.
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
	// At is when the pod is due to go: for EvictAt, a time after now; for
	// EvictNow, now if a taint is not tolerated, else the end of a
	// toleration that ran out at or before now; for Never, the zero Time.
	At          time.Time
	Taint       v1.Taint // the first untolerated taint, or the first whose toleration ends first
	Untolerated bool     // no toleration tolerates Taint
}

// String describes the decision for logs and events, such as
// "EvictAt 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)".
func (d Decision) String() string {
	switch {
	case d.Action == Never:
		return "Never"
	case d.Untolerated:
		return fmt.Sprintf("%v (taint %s not tolerated)", d.Action, taintString(&d.Taint))
	default:
		return fmt.Sprintf("%v %s (taint %s)", d.Action, d.At.Format(time.RFC3339Nano), taintString(&d.Taint))
	}
}

// taintString formats a taint as kubectl does: key[=value]:effect.
func taintString(t *v1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// Decide decides, as Kubernetes does, whether and when to evict a pod with
// tolerations from a node with taints; see [Matcher.Decide]. To decide again
// on later updates, use [Countdowns.Decide].
func Decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time) Decision {
	return Matcher{}.Decide(taints, tolerations, boundAt, now)
}

// Decide decides whether and when to evict a pod with tolerations from a node
// with taints (only NoExecute taints count). boundAt is when the pod was bound
// to the node ([PodBoundAt]). A taint tolerated by none gives EvictNow at now
// with Untolerated set. Otherwise each taint's countdown runs from
// max(taint.TimeAdded, boundAt) for the TolerationSeconds of the first
// toleration that tolerates it (nil: forever; huge: the largest Duration), and
// the earliest end is At: EvictNow if at or before now, else EvictAt; Never if
// none ends, or if now is zero. So a restarted controller gets the same At,
// and a pod that arrives on a node tainted long ago gets its full toleration.
//
// An unknown time (zero boundAt, nil TimeAdded) or one after now counts as
// now: it delays an eviction, never hastens it, but a caller deciding again
// later would restart the countdown at every call. [Countdowns] remembers
// when it first saw each unknown start, and so does not.
// With every time unknown, At is now + [MinTolerationTime], the Kubernetes rule.
func (m Matcher) Decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time) Decision {
	return m.decide(taints, tolerations, boundAt, now, nil)
}

// decide is Decide, with seen giving the start of a NoExecute taint that has
// no TimeAdded, if it has one there.
func (m Matcher) decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time, seen []taintSeen) Decision {
	if now.IsZero() {
		// An unset now is a caller's bug, not a moment in year 1: every
		// deadline would be in the past, so refuse to evict rather than evict.
		return Decision{}
	}
	bound := known(boundAt, now)
	var d Decision // Never
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != v1.TaintEffectNoExecute {
			continue
		}
		j := m.firstTolerating(taint, tolerations)
		if j < 0 {
			return Decision{Action: EvictNow, At: now, Taint: *taint, Untolerated: true}
		}
		seconds := tolerations[j].TolerationSeconds
		if seconds == nil {
			continue // tolerated forever: no deadline
		}
		var added time.Time
		if taint.TimeAdded != nil {
			added = taint.TimeAdded.Time
		} else if j := findTaint(seen, taint.Key); j >= 0 {
			added = seen[j].at
		}
		deadline := known(added, now)
		if bound.After(deadline) {
			deadline = bound
		}
		if *seconds > 0 {
			deadline = deadline.Add(secondsToDuration(*seconds))
		}
		if d.Action == Never || deadline.Before(d.At) {
			d = Decision{Action: EvictAt, At: deadline, Taint: *taint}
		}
	}
	if d.Action == EvictAt && !d.At.After(now) {
		d.Action = EvictNow
	}
	return d
}

// known returns t, or now if t is unknown (zero) or after now.
func known(t, now time.Time) time.Time {
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

// PodBoundAt returns the time of pod's True PodScheduled condition, and true;
// like a taint's TimeAdded it comes from the API server and does not change.
// It returns the zero Time and false when the pod has no such time.
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
