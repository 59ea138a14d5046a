package upstream

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/taintkit/taintkit/tolerations"
)

// FuzzToleratesDeviceTaint compares tolerations.ToleratesDeviceTaint with
// Kubernetes' own resourceclaim.ToleratesTaint over every field matching
// reads. Seeds are in testdata/fuzz/FuzzToleratesDeviceTaint.
func FuzzToleratesDeviceTaint(f *testing.F) {
	f.Add("k", "Equal", "v", "NoExecute", "k", "v", "NoExecute")
	f.Add("", "Exists", "", "", "k", "v", "NoExecute")
	f.Add("k", "", "v", "", "k", "v", "None")
	f.Add("k", "Lt", "1", "NoExecute", "k", "0", "NoExecute")
	f.Fuzz(func(t *testing.T, tolKey, tolOp, tolValue, tolEffect, taintKey, taintValue, taintEffect string) {
		tol := resourcev1.DeviceToleration{Key: tolKey, Operator: resourcev1.DeviceTolerationOperator(tolOp), Value: tolValue, Effect: resourcev1.DeviceTaintEffect(tolEffect)}
		taint := resourcev1.DeviceTaint{Key: taintKey, Value: taintValue, Effect: resourcev1.DeviceTaintEffect(taintEffect)}
		want := resourceclaim.ToleratesTaint(tol, taint)
		if got := tolerations.ToleratesDeviceTaint(&tol, &taint); got != want {
			t.Fatalf("ToleratesDeviceTaint(%+v, %+v) = %v, want %v (resourceclaim.ToleratesTaint)", tol, taint, got, want)
		}
	})
}

// BenchmarkDeviceTolerations matches a claim's four tolerations against a
// device's two NoExecute taints, the inner loop of a device eviction
// decision: ours against resourceclaim.ToleratesTaint, which takes both
// (100-byte) structs by value, in the same loop.
func BenchmarkDeviceTolerations(b *testing.B) {
	s30, s60 := int64(30), int64(60)
	tols := []resourcev1.DeviceToleration{
		{Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpEqual, Value: "planned", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		{Key: "example.com/ecc", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: &s60},
		{Key: "example.com/driver-upgrade", Operator: resourcev1.DeviceTolerationOpExists, TolerationSeconds: &s30},
		{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpEqual, Value: "fan", Effect: resourcev1.DeviceTaintEffectNoExecute},
	}
	added := &metav1.Time{Time: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	taints := []resourcev1.DeviceTaint{
		{Key: "example.com/ecc", Value: "uncorrectable", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: added},
		{Key: "example.com/driver-upgrade", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: added},
	}
	var n int
	b.Run("size=2x4/impl=taintkit", func(b *testing.B) {
		for b.Loop() {
			for i := range taints {
				for j := range tols {
					if tolerations.ToleratesDeviceTaint(&tols[j], &taints[i]) {
						n++
					}
				}
			}
		}
	})
	b.Run("size=2x4/impl=upstream", func(b *testing.B) {
		for b.Loop() {
			for i := range taints {
				for j := range tols {
					if resourceclaim.ToleratesTaint(tols[j], taints[i]) {
						n++
					}
				}
			}
		}
	})
	sinkBool = n > 0
}
