package upstream

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/taintkit/taintkit/tolerations"
)

var (
	sinkBool bool
	sinkTols []v1.Toleration
)

// BenchmarkGetMatchingTolerations compares tolerations.GetMatchingTolerations
// with upstream's own v1helper.GetMatchingTolerations (which also reads a
// feature gate on each call), on a pod with a mix of five tolerations on a
// node with three NoExecute taints, every one tolerated. The in-package
// benchmark (tolerations/bench_test.go) compares with a baseline built like
// it, without the feature gate, and says where the time goes.
func BenchmarkGetMatchingTolerations(b *testing.B) {
	s300, s60 := int64(300), int64(60)
	tols := []v1.Toleration{
		{Key: "example.com/team", Operator: v1.TolerationOpEqual, Value: "payments", Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &s300},
		{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &s60},
		{Key: "example.com/maintenance", Operator: v1.TolerationOpExists},
	}
	taints := []v1.Taint{
		{Key: "example.com/maintenance", Value: "true", Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute},
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute},
	}
	b.Run("size=3x5/impl=taintkit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkBool, sinkTols = tolerations.GetMatchingTolerations(taints, tols)
		}
	})
	b.Run("size=3x5/impl=upstream", func(b *testing.B) {
		b.ReportAllocs()
		logger := klog.Background()
		for b.Loop() {
			sinkBool, sinkTols = v1helper.GetMatchingTolerations(logger, taints, tols)
		}
	})
}
