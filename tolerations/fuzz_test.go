package tolerations_test

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/taintkit/taintkit/tolerations"
)

// FuzzToleratesTaint compares Matcher.ToleratesTaint with k8s.io/api's
// (*v1.Toleration).ToleratesTaint, with comparison operators off and on, over
// every field that matching reads. Seeds are in testdata/fuzz/FuzzToleratesTaint.
func FuzzToleratesTaint(f *testing.F) {
	f.Add("a", "Gt", "1", "NoExecute", "a", "2", "NoExecute", true)
	f.Fuzz(func(t *testing.T, tolKey, tolOp, tolValue, tolEffect, taintKey, taintValue, taintEffect string, cmp bool) {
		tol := v1.Toleration{Key: tolKey, Operator: v1.TolerationOperator(tolOp), Value: tolValue, Effect: v1.TaintEffect(tolEffect)}
		taint := v1.Taint{Key: taintKey, Value: taintValue, Effect: v1.TaintEffect(taintEffect)}
		m := tolerations.Matcher{ComparisonOperators: cmp}
		want := oracle(m, &tol, &taint)
		if got := m.ToleratesTaint(&tol, &taint); got != want {
			t.Fatalf("Matcher%+v.ToleratesTaint(%+v, %+v) = %v, want %v", m, tol, taint, got, want)
		}
		if !cmp {
			if got := tolerations.ToleratesTaint(&tol, &taint); got != want {
				t.Fatalf("ToleratesTaint(%+v, %+v) = %v, want %v", tol, taint, got, want)
			}
		}
	})
}

// FuzzParseDecimalInt64 proves the allocation-free parser of Lt/Gt values
// equivalent to what Kubernetes does: content.IsDecimalInteger, then
// strconv.ParseInt(s, 10, 64).
func FuzzParseDecimalInt64(f *testing.F) {
	f.Add("-9223372036854775808")
	f.Fuzz(func(t *testing.T, s string) {
		checkParse(t, s)
		if v, ok := tolerations.ParseDecimalInt64(s); ok && strconv.FormatInt(v, 10) != s {
			t.Fatalf("ParseDecimalInt64(%q) = %d accepted a non-canonical form", s, v)
		}
	})
}

// decodeLists turns fuzz bytes into taints and tolerations drawn from small
// alphabets, so that matches are frequent: the first byte gives the number
// of taints (0-5), then two bytes per taint, then three per toleration.
func decodeLists(data []byte) ([]v1.Taint, []v1.Toleration) {
	if len(data) == 0 {
		return nil, nil
	}
	n := int(data[0] % 6)
	data = data[1:]
	var taints []v1.Taint
	for ; n > 0 && len(data) >= 2; n-- {
		taints = append(taints, v1.Taint{
			Key:    keys[data[0]%4],
			Effect: effects[(data[0]/4)%5],
			Value:  values[int(data[1])%len(values)],
		})
		data = data[2:]
	}
	var tols []v1.Toleration
	for len(data) >= 3 {
		tol := v1.Toleration{
			Key:      keys[data[0]%4],
			Effect:   effects[(data[0]/4)%5],
			Operator: operators[int(data[1])%len(operators)],
			Value:    values[int(data[2])%len(values)],
		}
		if s := int64(data[1]/8) - 8; s != 23 { // 23: nil, "forever"
			tol.TolerationSeconds = &s
		}
		tols = append(tols, tol)
		data = data[3:]
	}
	return taints, tols
}

// FuzzGetMatchingTolerations compares GetMatchingTolerations and the helpers
// built on the same matching (AppendMatchingTolerations, TaintsTolerated,
// FirstUntoleratedTaint) with a baseline written like the Kubernetes original
// on top of k8s.io/api. Seeds are in testdata/fuzz/FuzzGetMatchingTolerations.
func FuzzGetMatchingTolerations(f *testing.F) {
	f.Add([]byte{2, 4, 0, 5, 3, 4, 2, 0, 1, 0, 3}, true)
	f.Fuzz(func(t *testing.T, data []byte, cmp bool) {
		taints, tols := decodeLists(data)
		m := tolerations.Matcher{ComparisonOperators: cmp}
		wantOK, want := baselineGetMatching(m, taints, tols)
		ok, got := m.GetMatchingTolerations(taints, tols)
		if ok != wantOK || got == nil || !equalTolerations(got, want) {
			t.Fatalf("GetMatchingTolerations(%v, %v) = %v, %v; want %v, %v", taints, tols, ok, got, wantOK, want)
		}
		if len(got) > 0 && len(tols) > 0 && &got[0] == &tols[0] {
			t.Fatal("result aliases the tolerations")
		}
		if !cmp {
			if ok0, got0 := tolerations.GetMatchingTolerations(taints, tols); ok0 != ok || !equalTolerations(got0, got) {
				t.Fatalf("package-level GetMatchingTolerations differs from the zero Matcher")
			}
		}
		if tt := m.TaintsTolerated(taints, tols); tt != wantOK {
			t.Fatalf("TaintsTolerated(%v, %v) = %v, want %v", taints, tols, tt, wantOK)
		}

		prefix := []v1.Toleration{{Key: "prefix"}}
		app, aok := m.AppendMatchingTolerations(prefix, taints, tols)
		wantApp := prefix
		if wantOK {
			wantApp = append(append([]v1.Toleration{}, prefix...), want...)
		}
		if aok != wantOK || !equalTolerations(app, wantApp) {
			t.Fatalf("AppendMatchingTolerations(%v, %v, %v) = %v, %v; want %v, %v", prefix, taints, tols, app, aok, wantApp, wantOK)
		}

		first, found := m.FirstUntoleratedTaint(taints, tols)
		if found == wantOK {
			t.Fatalf("FirstUntoleratedTaint found = %v, but all tolerated = %v", found, wantOK)
		}
		if found {
			// It is the first taint the baseline cannot tolerate on its own.
			for i := range taints {
				if ok, _ := baselineGetMatching(m, taints[i:i+1], tols); !ok {
					if first.Key != taints[i].Key || first.Value != taints[i].Value || first.Effect != taints[i].Effect {
						t.Fatalf("FirstUntoleratedTaint = %v, want %v", first, taints[i])
					}
					break
				}
			}
		}
	})
}

func equalTolerations(a, b []v1.Toleration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Operator != b[i].Operator || a[i].Value != b[i].Value ||
			a[i].Effect != b[i].Effect || a[i].TolerationSeconds != b[i].TolerationSeconds {
			return false
		}
	}
	return true
}
