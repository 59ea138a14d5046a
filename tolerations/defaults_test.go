package tolerations_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/taintkit/taintkit/tolerations"
)

func TestWithDefaultTolerations(t *testing.T) {
	nr := tolerations.NotReadyToleration(tolerations.DefaultTolerationSeconds)
	ur := tolerations.UnreachableToleration(tolerations.DefaultTolerationSeconds)
	other := v1.Toleration{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		in   []v1.Toleration
		want []v1.Toleration
	}{
		{"nil", nil, []v1.Toleration{nr, ur}},
		{"unrelated", []v1.Toleration{other}, []v1.Toleration{other, nr, ur}},
		{"both present", []v1.Toleration{ur, nr}, []v1.Toleration{ur, nr}},
		{"not-ready present", []v1.Toleration{tolFor(v1.TaintNodeNotReady, seconds(10))}, []v1.Toleration{tolFor(v1.TaintNodeNotReady, seconds(10)), ur}},
		// An empty key covers every key.
		{"empty key", []v1.Toleration{{Operator: v1.TolerationOpExists}}, []v1.Toleration{{Operator: v1.TolerationOpExists}}},
		// An empty effect covers NoExecute; the operator and value do not matter to the plugin.
		{"empty effect, any operator", []v1.Toleration{{Key: v1.TaintNodeUnreachable, Value: "x"}},
			[]v1.Toleration{{Key: v1.TaintNodeUnreachable, Value: "x"}, nr}},
		// A NoSchedule toleration of the key does not cover NoExecute.
		{"NoSchedule does not cover", []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
			[]v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}, nr, ur}},
		// An empty key with NoSchedule covers neither.
		{"empty key NoSchedule", []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
			[]v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}, nr, ur}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backing := make([]v1.Toleration, len(tc.in), len(tc.in)+4)
			copy(backing, tc.in)
			in := backing[:len(tc.in)]
			got := tolerations.WithDefaultTolerations(in)
			assert.Equal(t, tc.want, got, "WithDefaultTolerations(%v)", tc.in)
			assertSameTolerations(t, tc.in, in, "input modified")
			// Appending to the result must not write into the caller's array.
			assert.Len(t, append(got, v1.Toleration{Key: "appended"}), len(got)+1)
			assertSameTolerations(t, tc.in, backing[:len(tc.in)], "appending to the result wrote into the caller's array")
			assert.Equal(t, v1.Toleration{}, backing[:cap(backing)][len(tc.in)], "appending to the result wrote into the caller's spare capacity")
		})
	}
}

func TestDefaultTolerationsTolerate(t *testing.T) {
	got := tolerations.WithDefaultTolerationsSeconds(nil, 10, 20)
	require.Len(t, got, 2)
	assert.Equal(t, int64(10), *got[0].TolerationSeconds)
	assert.Equal(t, int64(20), *got[1].TolerationSeconds)
	assert.NotSame(t, got[0].TolerationSeconds, got[1].TolerationSeconds)

	taints := []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}, {Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}}
	ok, used := tolerations.GetMatchingTolerations(taints, got)
	require.True(t, ok)
	assert.Equal(t, []v1.Toleration{got[1], got[0]}, used)
	assert.Equal(t, int64(300), int64(tolerations.DefaultTolerationSeconds))
	a, b := tolerations.NotReadyToleration(1), tolerations.NotReadyToleration(1)
	assert.NotSame(t, a.TolerationSeconds, b.TolerationSeconds, "shared pointer")
}

// assertSameTolerations compares element by element, so nil and empty agree.
func assertSameTolerations(t *testing.T, want, got []v1.Toleration, msg string) {
	t.Helper()
	if assert.Len(t, got, len(want), msg) {
		for i := range want {
			assert.Equal(t, want[i], got[i], msg)
		}
	}
}
