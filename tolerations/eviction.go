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
	Action      Action
	At          time.Time // when due: the earliest end of a toleration, now if Untolerated, zero if Never
	Taint       v1.Taint  // the first untolerated taint, or the first whose toleration ends first
	Untolerated bool      // no toleration tolerates Taint
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

// Decide decides when to evict a pod with tolerations from a node with
// taints, matching as Kubernetes does ([Matcher.Decide]).
func Decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time) Decision {
	return Matcher{}.Decide(taints, tolerations, boundAt, now)
}

// Decide decides whether and when to evict a pod with tolerations, bound at
// boundAt ([PodBoundAt]), from a node with taints. A NoExecute taint
// tolerated by none gives EvictNow at now with Untolerated set. Otherwise each
// NoExecute taint's countdown runs from max(taint.TimeAdded, boundAt) for the
// TolerationSeconds of the first toleration that tolerates it (nil: forever),
// and the earliest end is At: EvictNow if at or before now, else EvictAt;
// Never if none ends, or if now is zero. So a restarted controller gets the
// same At, and a pod arriving on a node tainted long ago gets its full time.
//
// An unknown time (zero boundAt, nil TimeAdded) or one after now counts as
// now, which delays an eviction, never hastens it; to decide again later, use
// [Countdowns], or the countdown restarts at every call. With every time
// unknown, At is now + [MinTolerationTime], the Kubernetes rule.
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
