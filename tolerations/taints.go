package tolerations

import (
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Forever is what [MinTolerationTime] returns when every toleration used
// tolerates forever. It is negative, never a toleration time.
const Forever time.Duration = -1

// maxDuration is the largest time.Duration; toleration times clamp to it.
const maxDuration = time.Duration(math.MaxInt64)

// GetNoExecuteTaints returns a new, non-nil slice of the taints whose effect is
// NoExecute (the ones that evict), in order.
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
// (from [GetMatchingTolerations]) let it stay, as Kubernetes computes it: the
// least TolerationSeconds (≤ 0: 0; too large: the largest Duration), or
// [Forever] if all are nil. An empty list, for no taints or an untolerated
// one, gives 0, which is not "evict now": check first.
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
