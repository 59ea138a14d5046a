package tolerations

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ReasonDeletionByTaintManager is the reason the Kubernetes taint-eviction
// controller sets on a pod's [v1.DisruptionTarget] condition before it deletes
// the pod. k8s.io/api defines the condition type but not this reason; a
// controller built on this package should set it so that tools written for
// Kubernetes recognise its evictions.
const ReasonDeletionByTaintManager = "DeletionByTaintManager"

// EventReasonTaintManagerEviction is the reason of the events the Kubernetes
// taint-eviction controller records when it schedules, cancels or performs a
// pod's deletion.
const EventReasonTaintManagerEviction = "TaintManagerEviction"

// Action is what a [Decision] tells a controller to do with a pod.
type Action int

const (
	// Never means no eviction is due: the pod tolerates every NoExecute taint
	// forever, or there is none. Cancel any scheduled eviction. It is the zero
	// Action.
	Never Action = iota
	// EvictAt means evict at [Decision.At], which is after now.
	EvictAt
	// EvictNow means evict at once: a NoExecute taint is not tolerated, or a
	// toleration time has already run out.
	EvictNow
)

// String returns "Never", "EvictAt", "EvictNow", or "Action(n)" for other values.
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

// Decision is the outcome of [Decide]: whether and when to evict a pod from a
// node, and the taint that decides it. The zero Decision is "Never".
type Decision struct {
	// Action says what to do.
	Action Action
	// At is when the eviction is due: after now for EvictAt; at or before now
	// for EvictNow (now itself when Untolerated, otherwise the deadline that
	// has passed); the zero Time for Never. It depends only on the inputs of
	// Decide, so a controller that restarts and decides again gets the same
	// At, and can hand it to a timed queue as the fire time in both cases.
	At time.Time
	// Taint is the taint that decides it: the untolerated taint, or the taint
	// whose toleration runs out first (the first such taint on a tie). It is
	// the zero Taint for Never. It is a copy; its TimeAdded pointer is shared
	// with the caller's taint.
	Taint v1.Taint
	// Untolerated reports whether Action is EvictNow because no toleration
	// tolerates Taint at all.
	Untolerated bool
}

// String describes the decision for logs and events, for example
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

// Decide decides whether and when to evict a pod with tolerations from a node
// with taints, with comparison operators off. It is the zero [Matcher]'s
// [Matcher.Decide].
func Decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time) Decision {
	return Matcher{}.Decide(taints, tolerations, boundAt, now)
}

// Decide decides whether and when to evict a pod with tolerations from a node
// with taints. boundAt is when the pod was bound to the node (see
// [PodBoundAt]); now is the current time. Taints whose effect is not NoExecute
// are ignored, so node.Spec.Taints may be passed as is.
//
// For each NoExecute taint, in order, the toleration used is the first one
// that tolerates it, as in [Matcher.GetMatchingTolerations]:
//
//  1. If some taint is tolerated by none, the result is EvictNow at now, with
//     Untolerated set and the first such taint.
//  2. The taint's countdown starts at max(taint.TimeAdded, boundAt); an
//     unknown time (zero, or a nil TimeAdded) counts as now, and so does a
//     time after now (clock skew). A pod that arrives on a node tainted long
//     ago thus still gets its full toleration, and deciding again after a
//     controller restart does not restart anyone's countdown. Both times are
//     needed for that: with boundAt unknown, start is now at every call (the
//     pod might have arrived just now), so pass [PodBoundAt]'s time. Unknown
//     times only ever delay an eviction, never hasten it.
//  3. Its deadline is start + TolerationSeconds (seconds at or below zero:
//     start itself; seconds too large clamp to the largest time.Duration);
//     a nil TolerationSeconds gives no deadline.
//  4. The result is the earliest deadline: EvictNow if it is at or before
//     now, EvictAt otherwise; Never if no taint has a deadline.
//
// With every time unknown this is now + [MinTolerationTime] of the
// tolerations used, the original Kubernetes rule. Decide does not allocate.
func (m Matcher) Decide(taints []v1.Taint, tolerations []v1.Toleration, boundAt, now time.Time) Decision {
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

// PodBoundAt returns when pod was bound to its node: the LastTransitionTime of
// its PodScheduled condition, if that condition is True and has a time. It
// returns the zero Time and false when that is unknown (nil pod, no such
// condition, condition not True, or no time), which [Decide] treats as now.
//
// The time comes from the API server's clock, like a taint's TimeAdded, so
// the two compare meaningfully. It is the best record Kubernetes keeps of when
// a pod arrived on its node; it is not updated when the pod is later
// modified, so a restarted controller reads the same value.
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
