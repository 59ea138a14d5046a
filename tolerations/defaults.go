package tolerations

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// DefaultTolerationSeconds is the kube-apiserver's default not-ready and
// unreachable toleration, in seconds.
const DefaultTolerationSeconds = 300

// NotReadyToleration returns the DefaultTolerationSeconds admission plugin's
// toleration of [v1.TaintNodeNotReady]: Exists, NoExecute, seconds.
func NotReadyToleration(seconds int64) v1.Toleration {
	return noExecuteToleration(v1.TaintNodeNotReady, seconds)
}

// UnreachableToleration is [NotReadyToleration] for [v1.TaintNodeUnreachable].
func UnreachableToleration(seconds int64) v1.Toleration {
	return noExecuteToleration(v1.TaintNodeUnreachable, seconds)
}

// noExecuteToleration gives each toleration its own TolerationSeconds pointer.
func noExecuteToleration(key string, seconds int64) v1.Toleration {
	return v1.Toleration{
		Key:               key,
		Operator:          v1.TolerationOpExists,
		Effect:            v1.TaintEffectNoExecute,
		TolerationSeconds: &seconds,
	}
}

// WithDefaultTolerations is [WithDefaultTolerationsSeconds] with
// [DefaultTolerationSeconds] for both.
func WithDefaultTolerations(tolerations []v1.Toleration) []v1.Toleration {
	return WithDefaultTolerationsSeconds(tolerations, DefaultTolerationSeconds, DefaultTolerationSeconds)
}

// WithDefaultTolerationsSeconds appends [NotReadyToleration] and then
// [UnreachableToleration], as the DefaultTolerationSeconds admission plugin
// does, each unless a toleration with that Key or none and Effect NoExecute or
// none exists. Adding nothing, it returns tolerations clipped.
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
