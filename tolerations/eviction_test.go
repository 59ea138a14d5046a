package tolerations_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/tolerations"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns a taint added at t0+offset; a nil offset means TimeAdded is nil.
func taintAt(key string, added *time.Duration) v1.Taint {
	tn := v1.Taint{Key: key, Effect: v1.TaintEffectNoExecute}
	if added != nil {
		tn.TimeAdded = &metav1.Time{Time: t0.Add(*added)}
	}
	return tn
}

func dur(d time.Duration) *time.Duration { return &d }

func tolFor(key string, s *int64) v1.Toleration {
	return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: s}
}

func TestDecide(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	now := t0.Add(time.Hour)
	h := time.Hour // offsets below are relative to t0; now is t0+1h
	tests := []struct {
		name    string
		taints  []v1.Taint
		tols    []v1.Toleration
		boundAt time.Time
		want    tolerations.Decision
	}{
		{name: "no taints", want: tolerations.Decision{}},
		// Only NoExecute taints count.
		{name: "NoSchedule ignored", taints: []v1.Taint{{Key: "a", Effect: v1.TaintEffectNoSchedule}},
			want: tolerations.Decision{Action: tolerations.Never}},
		{name: "untolerated", taints: []v1.Taint{taintAt("a", nil)},
			want: tolerations.Decision{Action: tolerations.EvictNow, At: now, Taint: taintAt("a", nil), Untolerated: true}},
		{name: "forever", taints: []v1.Taint{taintAt("a", dur(0))}, tols: []v1.Toleration{tolFor("a", nil)},
			want: tolerations.Decision{Action: tolerations.Never}},
		// Every time unknown: the original rule, now + seconds.
		{name: "unknown times", taints: []v1.Taint{taintAt("a", nil)}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			want: tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(300 * time.Second), Taint: taintAt("a", nil)}},
		// Restart safety: the countdown started when the taint was added, not now.
		{name: "counts from TimeAdded", taints: []v1.Taint{taintAt("a", dur(h-100*time.Second))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			boundAt: t0,
			want:    tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(200 * time.Second), Taint: taintAt("a", dur(h-100*time.Second))}},
		{name: "expired", taints: []v1.Taint{taintAt("a", dur(0))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			boundAt: t0,
			want:    tolerations.Decision{Action: tolerations.EvictNow, At: t0.Add(300 * time.Second), Taint: taintAt("a", dur(0))}},
		// Deadline exactly now: evict now.
		{name: "deadline is now", taints: []v1.Taint{taintAt("a", dur(h-300*time.Second))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			boundAt: t0,
			want:    tolerations.Decision{Action: tolerations.EvictNow, At: now, Taint: taintAt("a", dur(h-300*time.Second))}},
		// A pod bound long after the taint was added still gets its full toleration.
		{name: "bound after taint", taints: []v1.Taint{taintAt("a", dur(0))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			boundAt: now.Add(-100 * time.Second),
			want:    tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(200 * time.Second), Taint: taintAt("a", dur(0))}},
		{name: "bound before taint", taints: []v1.Taint{taintAt("a", dur(h-100*time.Second))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			boundAt: t0,
			want:    tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(200 * time.Second), Taint: taintAt("a", dur(h-100*time.Second))}},
		// An unknown boundAt counts as now: the countdown cannot be anchored, so
		// the pod gets its full toleration from now (never an early eviction).
		{name: "unknown boundAt", taints: []v1.Taint{taintAt("a", dur(0))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			want: tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(300 * time.Second), Taint: taintAt("a", dur(0))}},
		// Unknown TimeAdded with a known boundAt: the taint counts as added now.
		{name: "unknown TimeAdded", taints: []v1.Taint{taintAt("a", nil)}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			boundAt: t0,
			want:    tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(300 * time.Second), Taint: taintAt("a", nil)}},
		// Times after now (clock skew) count as now.
		{name: "future TimeAdded", taints: []v1.Taint{taintAt("a", dur(5*h))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			want: tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(300 * time.Second), Taint: taintAt("a", dur(5*h))}},
		{name: "future boundAt", taints: []v1.Taint{taintAt("a", dur(0))}, tols: []v1.Toleration{tolFor("a", seconds(300))},
			boundAt: now.Add(time.Hour),
			want:    tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(300 * time.Second), Taint: taintAt("a", dur(0))}},
		// Several taints: the earliest deadline wins, not the smallest seconds
		// (the original would say now+100s).
		{name: "several taints", taints: []v1.Taint{taintAt("b", dur(h-10*time.Second)), taintAt("a", dur(h-250*time.Second))},
			tols:    []v1.Toleration{tolFor("a", seconds(300)), tolFor("b", seconds(100))},
			boundAt: t0,
			want:    tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(50 * time.Second), Taint: taintAt("a", dur(h-250*time.Second))}},
		{name: "several with forever", taints: []v1.Taint{taintAt("a", dur(0)), taintAt("b", nil)},
			tols: []v1.Toleration{tolFor("a", nil), tolFor("b", seconds(60))},
			want: tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(time.Minute), Taint: taintAt("b", nil)}},
		// Equal deadlines: the first taint decides.
		{name: "tie", taints: []v1.Taint{taintAt("a", nil), taintAt("b", nil)}, tols: []v1.Toleration{{Operator: "Exists", TolerationSeconds: seconds(60)}},
			want: tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(time.Minute), Taint: taintAt("a", nil)}},
		// An untolerated taint wins over any deadline, even an expired one.
		{name: "untolerated after expired", taints: []v1.Taint{taintAt("a", dur(0)), taintAt("c", nil)},
			tols: []v1.Toleration{tolFor("a", seconds(1))},
			want: tolerations.Decision{Action: tolerations.EvictNow, At: now, Taint: taintAt("c", nil), Untolerated: true}},
		{name: "zero seconds", taints: []v1.Taint{taintAt("a", nil)}, tols: []v1.Toleration{tolFor("a", seconds(0))},
			want: tolerations.Decision{Action: tolerations.EvictNow, At: now, Taint: taintAt("a", nil)}},
		{name: "negative seconds", taints: []v1.Taint{taintAt("a", dur(h-time.Minute))}, tols: []v1.Toleration{tolFor("a", seconds(-10))},
			boundAt: t0,
			want:    tolerations.Decision{Action: tolerations.EvictNow, At: now.Add(-time.Minute), Taint: taintAt("a", dur(h-time.Minute))}},
		// Huge seconds clamp to the largest Duration: still a deadline, never overflowed into the past.
		{name: "huge seconds", taints: []v1.Taint{taintAt("a", nil)}, tols: []v1.Toleration{tolFor("a", seconds(math.MaxInt64))},
			want: tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(maxDuration), Taint: taintAt("a", nil)}},
		// The first toleration that tolerates the taint is used, even if a later one is longer.
		{name: "first toleration used", taints: []v1.Taint{taintAt("a", nil)},
			tols: []v1.Toleration{{Operator: "Exists", TolerationSeconds: seconds(10)}, tolFor("a", nil)},
			want: tolerations.Decision{Action: tolerations.EvictAt, At: now.Add(10 * time.Second), Taint: taintAt("a", nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tolerations.Decide(tc.taints, tc.tols, tc.boundAt, now)
			assert.Equal(t, tc.want, got, "Decide(%v, %v, %v, now) = %v, want %v", tc.taints, tc.tols, tc.boundAt, got, tc.want)
		})
	}
}

func TestDecideComparisonOperators(t *testing.T) {
	taints := []v1.Taint{{Key: "cpu", Value: "8", Effect: v1.TaintEffectNoExecute}}
	tols := []v1.Toleration{{Key: "cpu", Operator: v1.TolerationOpGt, Value: "4", TolerationSeconds: seconds(30)}}
	got := tolerations.Matcher{ComparisonOperators: true}.Decide(taints, tols, time.Time{}, t0)
	assert.Equal(t, tolerations.EvictAt, got.Action)
	assert.Equal(t, t0.Add(30*time.Second), got.At)
	got = tolerations.Decide(taints, tols, time.Time{}, t0)
	assert.Equal(t, tolerations.EvictNow, got.Action)
	assert.True(t, got.Untolerated)
}

// TestDecideProperties checks, on random inputs, that Decide (1) reduces to
// the original rule when every time is unknown, and (2) is restart-safe: a
// later decision on the same inputs keeps the same At.
func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keysN := []string{"a", "b", "c"}
	for range 5000 {
		var taints []v1.Taint
		for range r.IntN(4) {
			tn := v1.Taint{Key: keysN[r.IntN(3)], Effect: v1.TaintEffectNoExecute}
			if r.IntN(4) == 0 {
				tn.Effect = v1.TaintEffectNoSchedule
			}
			taints = append(taints, tn)
		}
		var tols []v1.Toleration
		for range r.IntN(4) {
			tol := v1.Toleration{Key: keysN[r.IntN(3)], Operator: v1.TolerationOpExists}
			if r.IntN(2) == 0 {
				tol.TolerationSeconds = seconds(int64(r.IntN(600)) - 100)
			}
			tols = append(tols, tol)
		}
		now := t0.Add(time.Duration(r.IntN(3600)) * time.Second)

		// (1) every time unknown.
		d := tolerations.Decide(taints, tols, time.Time{}, now)
		ne := tolerations.GetNoExecuteTaints(taints)
		ok, used := tolerations.GetMatchingTolerations(ne, tols)
		switch min := tolerations.MinTolerationTime(used); {
		case !ok:
			require.Equal(t, tolerations.EvictNow, d.Action)
			require.True(t, d.Untolerated)
		case len(ne) == 0 || min == tolerations.Forever:
			require.Equal(t, tolerations.Never, d.Action, "%v %v", taints, tols)
		case min == 0:
			require.Equal(t, tolerations.EvictNow, d.Action)
			require.Equal(t, now, d.At)
		default:
			require.Equal(t, tolerations.EvictAt, d.Action)
			require.Equal(t, now.Add(min), d.At)
		}

		// (2) known times at or before now: deciding later keeps At.
		for i := range taints {
			taints[i].TimeAdded = &metav1.Time{Time: now.Add(-time.Duration(r.IntN(400)) * time.Second)}
		}
		bound := now.Add(-time.Duration(r.IntN(400)) * time.Second)
		first := tolerations.Decide(taints, tols, bound, now)
		later := now.Add(time.Duration(r.IntN(700)) * time.Second)
		again := tolerations.Decide(taints, tols, bound, later)
		if first.Action == tolerations.Never || first.Untolerated {
			require.Equal(t, first.Action, again.Action)
			continue
		}
		require.Equal(t, first.At, again.At, "restart moved the deadline")
		require.Equal(t, first.Taint, again.Taint)
		if again.At.After(later) {
			require.Equal(t, tolerations.EvictAt, again.Action)
		} else {
			require.Equal(t, tolerations.EvictNow, again.Action)
		}
	}
}

func TestDecisionString(t *testing.T) {
	assert.Equal(t, "Never", tolerations.Decision{}.String())
	assert.Equal(t, "EvictNow (taint dedicated=gpu:NoExecute not tolerated)",
		tolerations.Decision{Action: tolerations.EvictNow, At: t0, Taint: tDedicated, Untolerated: true}.String())
	assert.Equal(t, "EvictAt 2025-01-01T00:05:00Z (taint node.kubernetes.io/unreachable:NoExecute)",
		tolerations.Decision{Action: tolerations.EvictAt, At: t0.Add(5 * time.Minute), Taint: tUnreachable}.String())
	assert.Equal(t, "Action(7)", tolerations.Action(7).String())
	assert.Equal(t, "EvictAt", tolerations.EvictAt.String())
}

func TestPodBoundAt(t *testing.T) {
	cond := func(typ v1.PodConditionType, st v1.ConditionStatus, at time.Time) v1.PodCondition {
		return v1.PodCondition{Type: typ, Status: st, LastTransitionTime: metav1.Time{Time: at}}
	}
	pod := func(cs ...v1.PodCondition) *v1.Pod { return &v1.Pod{Status: v1.PodStatus{Conditions: cs}} }
	tests := []struct {
		name   string
		pod    *v1.Pod
		want   time.Time
		wantOK bool
	}{
		{"nil pod", nil, time.Time{}, false},
		{"no conditions", pod(), time.Time{}, false},
		{"scheduled", pod(cond(v1.PodReady, v1.ConditionTrue, t0.Add(time.Hour)), cond(v1.PodScheduled, v1.ConditionTrue, t0)), t0, true},
		// Not scheduled (yet): not bound.
		{"unschedulable", pod(cond(v1.PodScheduled, v1.ConditionFalse, t0)), time.Time{}, false},
		{"no time", pod(cond(v1.PodScheduled, v1.ConditionTrue, time.Time{})), time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tolerations.PodBoundAt(tc.pod)
			assert.Equal(t, tc.wantOK, ok)
			assert.True(t, tc.want.Equal(got), "PodBoundAt = %v, want %v", got, tc.want)
		})
	}
}

// A zero now is a caller's bug (an unset time), not a moment in year 1: Decide
// must not turn it into an eviction, whatever the taints.
func TestDecideZeroNow(t *testing.T) {
	added := &metav1.Time{Time: t0}
	tests := []struct {
		name   string
		taints []v1.Taint
		tols   []v1.Toleration
	}{
		{name: "untolerated", taints: []v1.Taint{taintAt("a", nil)}},
		{name: "tolerated for a while", taints: []v1.Taint{{Key: "a", Effect: v1.TaintEffectNoExecute, TimeAdded: added}},
			tols: []v1.Toleration{tolFor("a", seconds(300))}},
		{name: "zero seconds", taints: []v1.Taint{taintAt("a", nil)}, tols: []v1.Toleration{tolFor("a", seconds(0))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range []tolerations.Matcher{{}, {ComparisonOperators: true}} {
				got := m.Decide(tc.taints, tc.tols, t0, time.Time{})
				assert.Equal(t, tolerations.Decision{}, got, "%+v.Decide(%v, %v, t0, zero now) = %v, want Never", m, tc.taints, tc.tols, got)
			}
			got := tolerations.Decide(tc.taints, tc.tols, time.Time{}, time.Time{})
			assert.Equal(t, tolerations.Decision{}, got, "Decide(%v, %v, zero, zero) = %v, want Never", tc.taints, tc.tols, got)
		})
	}
}

// A pod with no PodScheduled condition on a taint with no TimeAdded: each
// unknown start counts as the now of that call, so a caller deciding again
// later must pass the time it first saw each unknown, as Decide's doc says;
// then the deadline holds.
func TestDecideUnknownStart(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{NodeName: "node-a", Tolerations: []v1.Toleration{tolFor("a", seconds(100))}}}
	taints := []v1.Taint{taintAt("a", nil)}
	boundAt, ok := tolerations.PodBoundAt(pod)
	require.False(t, ok)

	first := tolerations.Decide(taints, pod.Spec.Tolerations, boundAt, t0)
	assert.Equal(t, tolerations.EvictAt, first.Action)
	assert.Equal(t, t0.Add(100*time.Second), first.At, "unknown start counts as now")
	again := tolerations.Decide(taints, pod.Spec.Tolerations, boundAt, t0.Add(100*time.Second))
	assert.Equal(t, t0.Add(200*time.Second), again.At, "unknown start counts as the new now")

	// The caller remembers first sight (t0) for both unknowns.
	seen := []v1.Taint{taints[0]}
	seen[0].TimeAdded = &metav1.Time{Time: t0}
	for _, now := range []time.Time{t0, t0.Add(50 * time.Second)} {
		d := tolerations.Decide(seen, pod.Spec.Tolerations, t0, now)
		assert.Equal(t, tolerations.EvictAt, d.Action)
		assert.Equal(t, t0.Add(100*time.Second), d.At, "at +%v", now.Sub(t0))
	}
	d := tolerations.Decide(seen, pod.Spec.Tolerations, t0, t0.Add(100*time.Second))
	assert.Equal(t, tolerations.EvictNow, d.Action, "the countdown from first sight ends")
}
