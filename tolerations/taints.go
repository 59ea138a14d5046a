package tolerations

import (
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Forever is what [MinTolerationTime] returns when the tolerations used
// tolerate their taints forever (none of them has TolerationSeconds). It is
// negative, so it is never a valid toleration time.
const Forever time.Duration = -1

// maxDuration is the largest time.Duration; toleration times clamp to it.
const maxDuration = time.Duration(math.MaxInt64)

// GetNoExecuteTaints returns the taints whose effect is NoExecute, in order.
// The result is always a new slice (non-nil, possibly empty) that never
// aliases taints; it allocates at most once, the exact size of the result.
func GetNoExecuteTaints(taints []v1.Taint) []v1.Taint {
	n := 0
	for i := range taints {
		if taints[i].Effect == v1.TaintEffectNoExecute {
			n++
		}
	}
	if n == 0 {
		return []v1.Taint{}
	}
	out := make([]v1.Taint, 0, n)
	for i := range taints {
		if taints[i].Effect == v1.TaintEffectNoExecute {
			out = append(out, taints[i])
		}
	}
	return out
}

// MinTolerationTime returns how long the tolerations used for a pod's taints
// (as returned by [GetMatchingTolerations]) let the pod stay:
//
//   - no tolerations: 0 (evict at once);
//   - any TolerationSeconds at or below zero: 0;
//   - otherwise the smallest TolerationSeconds, ignoring tolerations with a
//     nil TolerationSeconds (they tolerate forever);
//   - if every TolerationSeconds is nil: [Forever].
//
// Seconds too large for a time.Duration clamp to the largest Duration (about
// 292 years): the result never overflows and never becomes [Forever] by
// accident. It does not allocate.
func MinTolerationTime(tolerations []v1.Toleration) time.Duration {
	if len(tolerations) == 0 {
		return 0
	}
	least := Forever
	for i := range tolerations {
		s := tolerations[i].TolerationSeconds
		if s == nil {
			continue
		}
		if *s <= 0 {
			return 0
		}
		if d := secondsToDuration(*s); least == Forever || d < least {
			least = d
		}
	}
	return least
}

// secondsToDuration converts a positive number of seconds to a Duration,
// clamping at the largest Duration instead of overflowing.
func secondsToDuration(s int64) time.Duration {
	if s > int64(maxDuration/time.Second) {
		return maxDuration
	}
	return time.Duration(s) * time.Second
}
