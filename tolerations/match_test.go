package tolerations_test

import (
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/taintkit/taintkit/tolerations"
)

// oracle is the Kubernetes answer: k8s.io/api's ToleratesTaint.
func oracle(m tolerations.Matcher, tol *v1.Toleration, taint *v1.Taint) bool {
	return tol.ToleratesTaint(logr.Discard(), taint, m.ComparisonOperators)
}

// baselineGetMatching is GetMatchingTolerations written like the Kubernetes
// original (v1helper.GetMatchingTolerations) on top of the oracle.
func baselineGetMatching(m tolerations.Matcher, taints []v1.Taint, tols []v1.Toleration) (bool, []v1.Toleration) {
	if len(taints) == 0 {
		return true, []v1.Toleration{}
	}
	if len(tols) == 0 {
		return false, []v1.Toleration{}
	}
	result := []v1.Toleration{}
	for i := range taints {
		tolerated := false
		for j := range tols {
			if oracle(m, &tols[j], &taints[i]) {
				result = append(result, tols[j])
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false, []v1.Toleration{}
		}
	}
	return true, result
}

var (
	keys      = []string{"", "a", "b", "node.kubernetes.io/unreachable"}
	operators = []v1.TolerationOperator{"", v1.TolerationOpEqual, v1.TolerationOpExists, v1.TolerationOpLt, v1.TolerationOpGt, "equal", "Bogus"}
	// values holds valid decimal integers and every kind of malformed one.
	values = []string{"", "x", "0", "1", "2", "10", "-1", "-0", "+1", "01", " 1", "1 ", "1e3", "0x1", "1.0", "-", "--1",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "99999999999999999999"}
	effects = []v1.TaintEffect{"", v1.TaintEffectNoExecute, v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, "Other"}
)

// TestToleratesTaintMatchesKubernetesExhaustively compares every combination
// of the interesting keys, operators, values and effects of a toleration and a
// taint with k8s.io/api, with comparison operators off and on.
func TestToleratesTaintMatchesKubernetesExhaustively(t *testing.T) {
	n := 0
	for _, cmp := range []bool{false, true} {
		m := tolerations.Matcher{ComparisonOperators: cmp}
		for _, tk := range keys {
			for _, op := range operators {
				for _, tv := range values {
					for _, te := range effects {
						tol := v1.Toleration{Key: tk, Operator: op, Value: tv, Effect: te}
						for _, xk := range keys[:3] {
							for _, xv := range values {
								for _, xe := range effects {
									taint := v1.Taint{Key: xk, Value: xv, Effect: xe}
									want := oracle(m, &tol, &taint)
									if got := m.ToleratesTaint(&tol, &taint); got != want {
										t.Fatalf("Matcher%+v.ToleratesTaint(%+v, %+v) = %v, want %v", m, tol, taint, got, want)
									}
									n++
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations agree", n)
}

func TestToleratesTaint(t *testing.T) {
	tests := []struct {
		name       string
		tol        v1.Toleration
		taint      v1.Taint
		want, cmpd bool // cmpd: the result with ComparisonOperators on
	}{
		{"equal", v1.Toleration{Key: "a", Operator: "Equal", Value: "x"}, v1.Taint{Key: "a", Value: "x", Effect: "NoExecute"}, true, true},
		// The empty operator means Equal.
		{"empty operator", v1.Toleration{Key: "a", Value: "x"}, v1.Taint{Key: "a", Value: "x", Effect: "NoExecute"}, true, true},
		{"equal other value", v1.Toleration{Key: "a", Value: "x"}, v1.Taint{Key: "a", Value: "y"}, false, false},
		{"exists any value", v1.Toleration{Key: "a", Operator: "Exists"}, v1.Taint{Key: "a", Value: "y"}, true, true},
		// Empty key with Exists tolerates everything.
		{"empty key exists", v1.Toleration{Operator: "Exists"}, v1.Taint{Key: "z", Value: "y", Effect: "NoSchedule"}, true, true},
		// Empty key with Equal: the key matches anything, the value must match.
		{"empty key equal", v1.Toleration{Value: "y"}, v1.Taint{Key: "z", Value: "y"}, true, true},
		{"effect differs", v1.Toleration{Key: "a", Operator: "Exists", Effect: "NoSchedule"}, v1.Taint{Key: "a", Effect: "NoExecute"}, false, false},
		{"empty effect matches all", v1.Toleration{Key: "a", Operator: "Exists"}, v1.Taint{Key: "a", Effect: "PreferNoSchedule"}, true, true},
		{"unknown operator", v1.Toleration{Key: "a", Operator: "exists"}, v1.Taint{Key: "a"}, false, false},
		{"gt", v1.Toleration{Key: "a", Operator: "Gt", Value: "5"}, v1.Taint{Key: "a", Value: "6"}, false, true},
		{"gt equal", v1.Toleration{Key: "a", Operator: "Gt", Value: "5"}, v1.Taint{Key: "a", Value: "5"}, false, false},
		{"lt", v1.Toleration{Key: "a", Operator: "Lt", Value: "5"}, v1.Taint{Key: "a", Value: "-5"}, false, true},
		{"lt min int64", v1.Toleration{Key: "a", Operator: "Lt", Value: "-9223372036854775807"}, v1.Taint{Key: "a", Value: "-9223372036854775808"}, false, true},
		// Malformed values never match.
		{"gt plus sign", v1.Toleration{Key: "a", Operator: "Gt", Value: "+1"}, v1.Taint{Key: "a", Value: "5"}, false, false},
		{"gt leading zero", v1.Toleration{Key: "a", Operator: "Gt", Value: "1"}, v1.Taint{Key: "a", Value: "05"}, false, false},
		{"lt minus zero", v1.Toleration{Key: "a", Operator: "Lt", Value: "5"}, v1.Taint{Key: "a", Value: "-0"}, false, false},
		{"gt overflow", v1.Toleration{Key: "a", Operator: "Gt", Value: "1"}, v1.Taint{Key: "a", Value: "9223372036854775808"}, false, false},
		{"gt empty", v1.Toleration{Key: "a", Operator: "Gt", Value: ""}, v1.Taint{Key: "a", Value: "1"}, false, false},
		{"gt space", v1.Toleration{Key: "a", Operator: "Gt", Value: "0"}, v1.Taint{Key: "a", Value: " 1"}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range []tolerations.Matcher{{}, {ComparisonOperators: true}} {
				want := tc.want
				if m.ComparisonOperators {
					want = tc.cmpd
				}
				assert.Equal(t, oracle(m, &tc.tol, &tc.taint), want, "test table disagrees with k8s.io/api")
				assert.Equal(t, want, m.ToleratesTaint(&tc.tol, &tc.taint), "Matcher%+v.ToleratesTaint(%+v, %+v)", m, tc.tol, tc.taint)
			}
			assert.Equal(t, tc.want, tolerations.ToleratesTaint(&tc.tol, &tc.taint), "package-level ToleratesTaint is the zero Matcher")
		})
	}
}

func TestToleratesTaintNil(t *testing.T) {
	m := tolerations.Matcher{ComparisonOperators: true}
	assert.False(t, m.ToleratesTaint(nil, &v1.Taint{}))
	assert.False(t, m.ToleratesTaint(&v1.Toleration{Operator: "Exists"}, nil))
	assert.False(t, tolerations.ToleratesTaint(nil, nil))
}

func TestParseDecimalInt64MatchesKubernetes(t *testing.T) {
	for _, s := range values {
		checkParse(t, s)
	}
	for i := int64(-1000); i <= 1000; i++ {
		checkParse(t, strconv.FormatInt(i, 10))
	}
}

// checkParse compares ParseDecimalInt64 with what Kubernetes does to an Lt/Gt
// value: content.IsDecimalInteger, then strconv.ParseInt(s, 10, 64).
func checkParse(t *testing.T, s string) {
	t.Helper()
	want, err := strconv.ParseInt(s, 10, 64)
	wantOK := len(content.IsDecimalInteger(s)) == 0 && err == nil
	got, ok := tolerations.ParseDecimalInt64(s)
	if ok != wantOK || (ok && got != want) {
		t.Fatalf("ParseDecimalInt64(%q) = %d, %v; want %d, %v", s, got, ok, want, wantOK)
	}
}

func TestToleratesTaintDoesNotAllocate(t *testing.T) {
	m := tolerations.Matcher{ComparisonOperators: true}
	for _, v := range values {
		tol := v1.Toleration{Key: "a", Operator: v1.TolerationOpGt, Value: v}
		taint := v1.Taint{Key: "a", Value: "-" + v}
		allocs := testing.AllocsPerRun(100, func() {
			m.ToleratesTaint(&tol, &taint)
			m.ToleratesTaint(&v1.Toleration{Key: "a", Operator: v1.TolerationOpLt, Value: "5"}, &taint)
		})
		assert.Zero(t, allocs, "value %q", v)
	}
}

var (
	tNotReady    = v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}
	tUnreachable = v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}
	tDedicated   = v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute}
)

func seconds(s int64) *int64 { return &s }

func TestGetMatchingTolerations(t *testing.T) {
	tolNR := v1.Toleration{Key: v1.TaintNodeNotReady, Operator: "Exists", Effect: "NoExecute", TolerationSeconds: seconds(300)}
	tolAll := v1.Toleration{Operator: "Exists"}
	tolGPU := v1.Toleration{Key: "dedicated", Value: "gpu"}
	tests := []struct {
		name   string
		taints []v1.Taint
		tols   []v1.Toleration
		wantOK bool
		want   []v1.Toleration
	}{
		{"no taints", nil, []v1.Toleration{tolNR}, true, []v1.Toleration{}},
		{"no taints no tolerations", []v1.Taint{}, nil, true, []v1.Toleration{}},
		{"no tolerations", []v1.Taint{tNotReady}, nil, false, []v1.Toleration{}},
		{"one", []v1.Taint{tNotReady}, []v1.Toleration{tolGPU, tolNR}, true, []v1.Toleration{tolNR}},
		// The first toleration that matches wins, even if a later one is more specific.
		{"first wins", []v1.Taint{tNotReady}, []v1.Toleration{tolAll, tolNR}, true, []v1.Toleration{tolAll}},
		// One toleration used for two taints appears twice.
		{"reused", []v1.Taint{tNotReady, tUnreachable}, []v1.Toleration{tolAll}, true, []v1.Toleration{tolAll, tolAll}},
		{"order of taints", []v1.Taint{tDedicated, tNotReady}, []v1.Toleration{tolNR, tolGPU}, true, []v1.Toleration{tolGPU, tolNR}},
		{"one untolerated", []v1.Taint{tNotReady, tUnreachable}, []v1.Toleration{tolNR}, false, []v1.Toleration{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, got := tolerations.GetMatchingTolerations(tc.taints, tc.tols)
			assert.Equal(t, tc.wantOK, ok)
			require.NotNil(t, got, "GetMatchingTolerations(%v, %v) returned a nil slice", tc.taints, tc.tols)
			assert.Equal(t, tc.want, got, "GetMatchingTolerations(%v, %v)", tc.taints, tc.tols)
			bok, bgot := baselineGetMatching(tolerations.Matcher{}, tc.taints, tc.tols)
			assert.Equal(t, bok, ok, "baseline")
			assert.Equal(t, bgot, got, "baseline")

			assert.Equal(t, ok, tolerations.TaintsTolerated(tc.taints, tc.tols))
			first, found := tolerations.FirstUntoleratedTaint(tc.taints, tc.tols)
			assert.Equal(t, !ok, found)
			if !found {
				assert.Equal(t, v1.Taint{}, first)
			}
		})
	}
}

func TestFirstUntoleratedTaint(t *testing.T) {
	tols := []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: "Exists"}}
	got, ok := tolerations.FirstUntoleratedTaint([]v1.Taint{tNotReady, tDedicated, tUnreachable}, tols)
	assert.True(t, ok)
	assert.Equal(t, tDedicated, got, "the first untolerated taint, in order")

	m := tolerations.Matcher{ComparisonOperators: true}
	gt := []v1.Toleration{{Key: "cpu", Operator: "Gt", Value: "4"}}
	_, ok = m.FirstUntoleratedTaint([]v1.Taint{{Key: "cpu", Value: "8"}}, gt)
	assert.False(t, ok, "Gt tolerates with comparison operators on")
	got, ok = tolerations.FirstUntoleratedTaint([]v1.Taint{{Key: "cpu", Value: "8"}}, gt)
	assert.True(t, ok, "Gt never tolerates with comparison operators off")
	assert.Equal(t, "cpu", got.Key)
}

func TestGetMatchingTolerationsNeverAliases(t *testing.T) {
	tols := []v1.Toleration{{Key: "a", Operator: "Exists"}, {Key: "b", Operator: "Exists"}}
	taints := []v1.Taint{{Key: "a"}, {Key: "b"}}
	ok, got := tolerations.GetMatchingTolerations(taints, tols)
	require.True(t, ok)
	require.Len(t, got, 2)
	assert.NotSame(t, &tols[0], &got[0])
	got[0].Key = "changed"
	got = append(got, v1.Toleration{Key: "appended"})
	_ = got
	assert.Equal(t, "a", tols[0].Key, "writing to the result changed the caller's tolerations")
}

func TestAppendMatchingTolerations(t *testing.T) {
	tols := []v1.Toleration{{Key: "a", Operator: "Exists"}, {Key: "b", Operator: "Exists"}}
	sentinel := v1.Toleration{Key: "sentinel"}

	t.Run("appends after existing elements", func(t *testing.T) {
		dst := []v1.Toleration{sentinel}
		got, ok := tolerations.AppendMatchingTolerations(dst, []v1.Taint{{Key: "b"}, {Key: "a"}}, tols)
		require.True(t, ok)
		assert.Equal(t, []v1.Toleration{sentinel, tols[1], tols[0]}, got)
	})
	t.Run("false leaves dst and its spare capacity untouched", func(t *testing.T) {
		backing := []v1.Toleration{sentinel, sentinel, sentinel, sentinel}
		dst := backing[:1]
		got, ok := tolerations.AppendMatchingTolerations(dst, []v1.Taint{{Key: "a"}, {Key: "c"}}, tols)
		require.False(t, ok)
		assert.Equal(t, dst, got)
		assert.Equal(t, []v1.Toleration{sentinel, sentinel, sentinel, sentinel}, backing, "spare capacity written on failure")
	})
	t.Run("many taints", func(t *testing.T) {
		// More taints than the stack buffer takes the two-pass path.
		var taints []v1.Taint
		var want []v1.Toleration
		for i := range 40 {
			taints = append(taints, v1.Taint{Key: []string{"a", "b"}[i%2]})
			want = append(want, tols[i%2])
		}
		got, ok := tolerations.AppendMatchingTolerations(nil, taints, tols)
		require.True(t, ok)
		assert.Equal(t, want, got)
		backing := []v1.Toleration{sentinel, sentinel}
		taints = append(taints, v1.Taint{Key: "c"})
		got, ok = tolerations.AppendMatchingTolerations(backing[:0], taints, tols)
		assert.False(t, ok)
		assert.Empty(t, got)
		assert.Equal(t, []v1.Toleration{sentinel, sentinel}, backing)
		ok, got = tolerations.GetMatchingTolerations(taints, tols)
		assert.False(t, ok)
		assert.NotNil(t, got)
	})
	t.Run("reused dst does not allocate", func(t *testing.T) {
		// A few taints, and more than the one-pass path takes.
		for _, n := range []int{3, 40} {
			taints := make([]v1.Taint, n)
			for i := range taints {
				taints[i].Key = []string{"a", "b"}[i%2]
			}
			var dst []v1.Toleration
			allocs := testing.AllocsPerRun(100, func() {
				var ok bool
				dst, ok = tolerations.AppendMatchingTolerations(dst[:0], taints, tols)
				if !ok {
					panic("not tolerated")
				}
			})
			assert.Zero(t, allocs, "%d taints", n)
			assert.Len(t, dst, n)
		}
	})
}

func TestAllocations(t *testing.T) {
	tols := []v1.Toleration{
		{Key: "x", Operator: "Gt", Value: "01"},
		{Key: v1.TaintNodeNotReady, Operator: "Exists", TolerationSeconds: seconds(300)},
		{Key: v1.TaintNodeUnreachable, Operator: "Exists", TolerationSeconds: seconds(60)},
		{Key: "dedicated", Value: "gpu"},
	}
	taints := []v1.Taint{tNotReady, tUnreachable, tDedicated}
	m := tolerations.Matcher{ComparisonOperators: true}
	for name, f := range map[string]func(){
		"TaintsTolerated":       func() { m.TaintsTolerated(taints, tols) },
		"FirstUntoleratedTaint": func() { m.FirstUntoleratedTaint(taints, tols[:1]) },
		"MinTolerationTime":     func() { tolerations.MinTolerationTime(tols) },
		"Decide":                func() { m.Decide(taints, tols, t0, t0) },
		"GetMatchingTolerations untolerated": func() {
			m.GetMatchingTolerations(taints, tols[:1])
		},
	} {
		assert.Zero(t, testing.AllocsPerRun(100, f), name)
	}
	allocs := testing.AllocsPerRun(100, func() { m.GetMatchingTolerations(taints, tols) })
	assert.Equal(t, 1.0, allocs, "GetMatchingTolerations allocates the result only")
}
