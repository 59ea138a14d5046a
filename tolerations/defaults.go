package tolerations

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// DefaultTolerationSeconds is how long, in seconds, the default not-ready and
// unreachable tolerations let a pod stay on a failed node: 300, the default of
// the kube-apiserver flags --default-not-ready-toleration-seconds and
// --default-unreachable-toleration-seconds.
const DefaultTolerationSeconds = 300

// NotReadyToleration returns the toleration the DefaultTolerationSeconds
// admission plugin gives a pod for the [v1.TaintNodeNotReady] NoExecute taint:
// operator Exists, effect NoExecute, the given seconds. Each call returns a
// new TolerationSeconds pointer.
func NotReadyToleration(seconds int64) v1.Toleration {
	return noExecuteToleration(v1.TaintNodeNotReady, seconds)
}

// UnreachableToleration returns the toleration the DefaultTolerationSeconds
// admission plugin gives a pod for the [v1.TaintNodeUnreachable] NoExecute
// taint: operator Exists, effect NoExecute, the given seconds. Each call
// returns a new TolerationSeconds pointer.
func UnreachableToleration(seconds int64) v1.Toleration {
	return noExecuteToleration(v1.TaintNodeUnreachable, seconds)
}

func noExecuteToleration(key string, seconds int64) v1.Toleration {
	return v1.Toleration{
		Key:               key,
		Operator:          v1.TolerationOpExists,
		Effect:            v1.TaintEffectNoExecute,
		TolerationSeconds: &seconds,
	}
}

// WithDefaultTolerations returns tolerations plus the default not-ready and
// unreachable NoExecute tolerations, each of [DefaultTolerationSeconds], where
// missing. It is [WithDefaultTolerationsSeconds] with both times set to
// DefaultTolerationSeconds.
func WithDefaultTolerations(tolerations []v1.Toleration) []v1.Toleration {
	return WithDefaultTolerationsSeconds(tolerations, DefaultTolerationSeconds, DefaultTolerationSeconds)
}

// WithDefaultTolerationsSeconds does what Kubernetes' DefaultTolerationSeconds
// admission plugin does to a new pod: it appends [NotReadyToleration] with
// notReadySeconds unless some toleration already covers the
// [v1.TaintNodeNotReady] key, and [UnreachableToleration] with
// unreachableSeconds unless some toleration already covers
// [v1.TaintNodeUnreachable], in that order. By the plugin's rule a toleration
// covers a key if its Key is that key or empty and its Effect is NoExecute or
// empty, whatever its operator, value and seconds.
//
// It never modifies the caller's slice. When something is added the result is
// a new slice; when nothing is, it is tolerations itself with its capacity
// clipped to its length, so appending to the result never writes into the
// caller's backing array.
func WithDefaultTolerationsSeconds(tolerations []v1.Toleration, notReadySeconds, unreachableSeconds int64) []v1.Toleration {
	needNotReady := !coversNoExecute(tolerations, v1.TaintNodeNotReady)
	needUnreachable := !coversNoExecute(tolerations, v1.TaintNodeUnreachable)
	if !needNotReady && !needUnreachable {
		return slices.Clip(tolerations)
	}
	n := len(tolerations)
	if needNotReady {
		n++
	}
	if needUnreachable {
		n++
	}
	out := make([]v1.Toleration, 0, n)
	out = append(out, tolerations...)
	if needNotReady {
		out = append(out, NotReadyToleration(notReadySeconds))
	}
	if needUnreachable {
		out = append(out, UnreachableToleration(unreachableSeconds))
	}
	return out
}

// coversNoExecute reports whether some toleration covers key by the
// admission plugin's rule.
func coversNoExecute(tolerations []v1.Toleration, key string) bool {
	for i := range tolerations {
		t := &tolerations[i]
		if (t.Key == key || t.Key == "") && (t.Effect == v1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}
