package tolerations_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/taintkit/taintkit/tolerations"
)

func TestMinTolerationTime(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	tol := func(s *int64) v1.Toleration { return v1.Toleration{Operator: "Exists", TolerationSeconds: s} }
	tests := []struct {
		name string
		tols []v1.Toleration
		want time.Duration
	}{
		{"none", nil, 0},
		{"empty", []v1.Toleration{}, 0},
		{"nil seconds", []v1.Toleration{tol(nil)}, tolerations.Forever},
		{"all nil", []v1.Toleration{tol(nil), tol(nil)}, tolerations.Forever},
		{"one", []v1.Toleration{tol(seconds(300))}, 300 * time.Second},
		// nil seconds (forever) is ignored next to a finite one.
		{"nil and finite", []v1.Toleration{tol(nil), tol(seconds(60))}, time.Minute},
		{"min", []v1.Toleration{tol(seconds(300)), tol(seconds(30)), tol(seconds(60))}, 30 * time.Second},
		{"zero", []v1.Toleration{tol(seconds(300)), tol(seconds(0))}, 0},
		{"negative", []v1.Toleration{tol(seconds(-5)), tol(nil)}, 0},
		{"min int64", []v1.Toleration{tol(seconds(math.MinInt64))}, 0},
		// The largest seconds that still fit a Duration exactly.
		{"largest exact", []v1.Toleration{tol(seconds(int64(maxDuration / time.Second)))}, maxDuration / time.Second * time.Second},
		// Too large for a Duration: clamped, not overflowed to a negative (Forever-like) value.
		{"huge clamps", []v1.Toleration{tol(seconds(int64(maxDuration/time.Second) + 1))}, maxDuration},
		// The original turned MaxInt64 seconds into "forever" (-1).
		{"max int64 is not forever", []v1.Toleration{tol(seconds(math.MaxInt64))}, maxDuration},
		{"huge and finite", []v1.Toleration{tol(seconds(math.MaxInt64)), tol(seconds(10))}, 10 * time.Second},
		{"huge and nil", []v1.Toleration{tol(nil), tol(seconds(math.MaxInt64))}, maxDuration},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tolerations.MinTolerationTime(tc.tols)
			assert.Equal(t, tc.want, got, "MinTolerationTime(%v) = %v, want %v", tc.tols, got, tc.want)
		})
	}
	assert.Negative(t, int64(tolerations.Forever))
}

func TestGetNoExecuteTaints(t *testing.T) {
	ns := v1.Taint{Key: "a", Effect: v1.TaintEffectNoSchedule}
	pns := v1.Taint{Key: "b", Effect: v1.TaintEffectPreferNoSchedule}
	ne1 := v1.Taint{Key: "c", Effect: v1.TaintEffectNoExecute}
	ne2 := v1.Taint{Key: "d", Value: "v", Effect: v1.TaintEffectNoExecute}

	got := tolerations.GetNoExecuteTaints(nil)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	assert.Equal(t, []v1.Taint{}, tolerations.GetNoExecuteTaints([]v1.Taint{ns, pns, {Key: "e"}}))

	in := []v1.Taint{ne1, ns, ne2, pns}
	got = tolerations.GetNoExecuteTaints(in)
	assert.Equal(t, []v1.Taint{ne1, ne2}, got)
	assert.Equal(t, 2, cap(got), "exact-size result")

	all := []v1.Taint{ne1, ne2}
	got = tolerations.GetNoExecuteTaints(all)
	require.Len(t, got, 2)
	got[0].Key = "changed"
	assert.Equal(t, "c", all[0].Key, "result aliases the caller's slice")
}
