package manager

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// tolerationsEqual must say what apiequality.Semantic.DeepEqual says, which
// PodUpdated used before: every pair of a set of tolerations lists that
// differ in one field at a time, nil and empty included.
func TestTolerationsEqualIsSemanticDeepEqual(t *testing.T) {
	base := v1.Toleration{Key: "k", Operator: v1.TolerationOpEqual, Value: "v", Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}
	variants := []v1.Toleration{base}
	for _, f := range []func(*v1.Toleration){
		func(x *v1.Toleration) { x.Key = "k2" },
		func(x *v1.Toleration) { x.Operator = v1.TolerationOpExists },
		func(x *v1.Toleration) { x.Value = "v2" },
		func(x *v1.Toleration) { x.Effect = v1.TaintEffectNoSchedule },
		func(x *v1.Toleration) { x.TolerationSeconds = nil },
		func(x *v1.Toleration) { x.TolerationSeconds = ptr.To[int64](31) },
		func(x *v1.Toleration) { x.TolerationSeconds = ptr.To[int64](30) }, // another pointer, same value
	} {
		v := base
		f(&v)
		variants = append(variants, v)
	}
	lists := [][]v1.Toleration{nil, {}}
	for _, a := range variants {
		lists = append(lists, []v1.Toleration{a})
		for _, b := range variants {
			lists = append(lists, []v1.Toleration{a, b})
		}
	}
	for _, a := range lists {
		for _, b := range lists {
			if got, want := tolerationsEqual(a, b), apiequality.Semantic.DeepEqual(a, b); got != want {
				t.Fatalf("tolerationsEqual(%v, %v) = %v, Semantic.DeepEqual says %v", a, b, got, want)
			}
		}
	}
}
