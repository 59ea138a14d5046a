package tolerations

import (
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Matcher matches tolerations against taints. ComparisonOperators selects
// whether the Lt and Gt operators are honoured, as the enableComparisonOperators
// argument of k8s.io/api's (*v1.Toleration).ToleratesTaint does.
//
// The zero Matcher matches as Kubernetes does with comparison operators off.
// A Matcher is a small value: copy it freely. It is safe for concurrent use by
// multiple goroutines.
type Matcher struct {
	// ComparisonOperators, when true, makes a toleration with operator Lt or Gt
	// match a taint whose value compares as required with the toleration's
	// value, both read as strict decimal int64 integers. When false, Lt and Gt
	// never match.
	ComparisonOperators bool
}

// ToleratesTaint reports whether toleration tolerates taint, with comparison
// operators off. It is the zero [Matcher]'s [Matcher.ToleratesTaint].
func ToleratesTaint(toleration *v1.Toleration, taint *v1.Taint) bool {
	return Matcher{}.ToleratesTaint(toleration, taint)
}

// ToleratesTaint reports whether toleration tolerates taint. The result is
// identical to k8s.io/api's toleration.ToleratesTaint(logger, taint,
// m.ComparisonOperators) for every pair of non-nil arguments:
//
//   - a non-empty toleration Effect must equal the taint's Effect;
//   - a non-empty toleration Key must equal the taint's Key;
//   - operator "" or Equal: the values must be equal;
//   - operator Exists: any value matches;
//   - operator Lt (Gt): only with m.ComparisonOperators, and only when both
//     values are strict decimal int64 integers and the taint's value is less
//     (greater) than the toleration's;
//   - any other operator never matches.
//
// Unlike the original it never logs and never allocates. A nil toleration or
// taint is tolerated by nothing: the result is false.
func (m Matcher) ToleratesTaint(toleration *v1.Toleration, taint *v1.Taint) bool {
	if toleration == nil || taint == nil {
		return false
	}
	return m.tolerates(toleration, taint)
}

// tolerates is ToleratesTaint for non-nil arguments. It is small enough to be
// inlined into the matching loops: it rejects on the key, where most
// tolerations of a real list fail (keys of different lengths compare without
// reading their bytes), and leaves the rest to toleratesKeyed. The order of
// the independent key and effect checks does not change the result.
func (m Matcher) tolerates(tol *v1.Toleration, taint *v1.Taint) bool {
	if tol.Key != "" && tol.Key != taint.Key {
		return false
	}
	return m.toleratesKeyed(tol, taint)
}

// toleratesKeyed is tolerates once the key is known to match.
func (m Matcher) toleratesKeyed(tol *v1.Toleration, taint *v1.Taint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	switch tol.Operator {
	case "", v1.TolerationOpEqual:
		return tol.Value == taint.Value
	case v1.TolerationOpExists:
		return true
	case v1.TolerationOpLt, v1.TolerationOpGt:
		if !m.ComparisonOperators {
			return false
		}
		return compareValues(tol.Operator, tol.Value, taint.Value)
	default:
		return false
	}
}

// compareValues applies Lt or Gt (taint value op toleration value) to two
// values that must both be strict decimal int64 integers.
func compareValues(op v1.TolerationOperator, tolValue, taintValue string) bool {
	want, ok := parseDecimalInt64(tolValue)
	if !ok {
		return false
	}
	got, ok := parseDecimalInt64(taintValue)
	if !ok {
		return false
	}
	if op == v1.TolerationOpLt {
		return got < want
	}
	return got > want
}

// parseDecimalInt64 parses s as Kubernetes parses Lt/Gt values: it accepts
// exactly the strings that pass k8s.io/apimachinery's content.IsDecimalInteger
// ("0", or an optional '-' then a digit 1-9 then digits) and that
// strconv.ParseInt(s, 10, 64) accepts (no overflow). It does not allocate,
// even on failure, which is why it does not call either of them.
func parseDecimalInt64(s string) (int64, bool) {
	n := len(s)
	if n == 0 {
		return 0, false
	}
	i := 0
	limit := uint64(math.MaxInt64)
	if s[0] == '-' {
		if n == 1 {
			return 0, false
		}
		i = 1
		limit = uint64(math.MaxInt64) + 1 // |math.MinInt64|
	}
	if s[i] == '0' {
		// "0" is the only valid value with a leading zero; "-0" and "01" are not.
		return 0, n == 1
	}
	var u uint64
	for ; i < n; i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		if u > limit/10 {
			return 0, false // u*10 alone exceeds the limit
		}
		u = u*10 + uint64(d)
		if u > limit {
			return 0, false
		}
	}
	if s[0] == '-' {
		return int64(-u), true // two's complement: -(1<<63) wraps to MinInt64
	}
	return int64(u), true
}

// firstTolerating returns the index of the first toleration that tolerates
// taint, or -1.
func (m Matcher) firstTolerating(taint *v1.Taint, tolerations []v1.Toleration) int {
	for j := range tolerations {
		if m.tolerates(&tolerations[j], taint) {
			return j
		}
	}
	return -1
}

// TaintsTolerated reports whether every taint is tolerated by at least one of
// tolerations, with comparison operators off. It is the zero [Matcher]'s
// [Matcher.TaintsTolerated].
func TaintsTolerated(taints []v1.Taint, tolerations []v1.Toleration) bool {
	return Matcher{}.TaintsTolerated(taints, tolerations)
}

// TaintsTolerated reports whether every taint is tolerated by at least one of
// tolerations; it is true when taints is empty. It gives the same answer as
// the bool of [Matcher.GetMatchingTolerations] but never allocates, which
// makes it the check to use on hot paths.
func (m Matcher) TaintsTolerated(taints []v1.Taint, tolerations []v1.Toleration) bool {
	for i := range taints {
		if m.firstTolerating(&taints[i], tolerations) < 0 {
			return false
		}
	}
	return true
}

// FirstUntoleratedTaint returns the first taint, in order, that none of
// tolerations tolerates, with comparison operators off. It is the zero
// [Matcher]'s [Matcher.FirstUntoleratedTaint].
func FirstUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration) (v1.Taint, bool) {
	return Matcher{}.FirstUntoleratedTaint(taints, tolerations)
}

// FirstUntoleratedTaint returns the first taint, in order, that none of
// tolerations tolerates, and true; or the zero Taint and false when every
// taint is tolerated. Callers use it to say why a pod is evicted. The
// returned Taint is a copy whose TimeAdded pointer is shared with the
// caller's taint. It does not allocate.
func (m Matcher) FirstUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration) (v1.Taint, bool) {
	for i := range taints {
		if m.firstTolerating(&taints[i], tolerations) < 0 {
			return taints[i], true
		}
	}
	return v1.Taint{}, false
}

// GetMatchingTolerations reports whether tolerations tolerate every taint and
// returns the toleration used for each, with comparison operators off. It is
// the zero [Matcher]'s [Matcher.GetMatchingTolerations].
func GetMatchingTolerations(taints []v1.Taint, tolerations []v1.Toleration) (bool, []v1.Toleration) {
	return Matcher{}.GetMatchingTolerations(taints, tolerations)
}

// GetMatchingTolerations reports whether tolerations tolerate every taint. If
// they do, the slice holds, for each taint in order, a copy of the first
// toleration that tolerates it (so it has len(taints) elements, and a
// toleration used for several taints appears several times). If some taint is
// not tolerated, the result is false and a non-nil empty slice. With no
// taints the result is true and a non-nil empty slice.
//
// The returned slice is always new: it never aliases tolerations' backing
// array (the TolerationSeconds pointers inside are shared with the caller's
// tolerations, as in Kubernetes). It allocates at most once, the exact size
// of the result.
func (m Matcher) GetMatchingTolerations(taints []v1.Taint, tolerations []v1.Toleration) (bool, []v1.Toleration) {
	if len(taints) == 0 {
		return true, []v1.Toleration{}
	}
	// A nil dst makes appendMatching allocate exactly len(taints) elements, and
	// only once every taint is known to be tolerated.
	used, ok := m.appendMatching(nil, taints, tolerations)
	if !ok {
		return false, []v1.Toleration{}
	}
	return true, used
}

// AppendMatchingTolerations appends to dst, for each taint in order, the first
// toleration that tolerates it, with comparison operators off, and returns the
// extended slice and true; if some taint is not tolerated, it returns dst
// unchanged and false. It is the zero [Matcher]'s
// [Matcher.AppendMatchingTolerations].
func AppendMatchingTolerations(dst []v1.Toleration, taints []v1.Taint, tolerations []v1.Toleration) ([]v1.Toleration, bool) {
	return Matcher{}.AppendMatchingTolerations(dst, taints, tolerations)
}

// AppendMatchingTolerations appends to dst, for each taint in order, a copy of
// the first toleration that tolerates it, and returns the extended slice and
// true, as [Matcher.GetMatchingTolerations] would return them. If some taint is
// not tolerated it returns dst unchanged and false: nothing is appended and no
// element of dst's backing array is written. It allocates only when dst lacks
// room for len(taints) more elements, so a caller that reuses
// dst[:0] across calls matches without allocating.
//
// dst must not share a backing array with tolerations.
func (m Matcher) AppendMatchingTolerations(dst []v1.Toleration, taints []v1.Taint, tolerations []v1.Toleration) ([]v1.Toleration, bool) {
	return m.appendMatching(dst, taints, tolerations)
}

// stackTaints is how many taints appendMatching handles with one matching
// pass, remembering the matches in a stack array. Nodes rarely carry more than
// a handful of NoExecute taints; beyond this it matches twice.
const stackTaints = 16

func (m Matcher) appendMatching(dst []v1.Toleration, taints []v1.Taint, tolerations []v1.Toleration) ([]v1.Toleration, bool) {
	n := len(taints)
	if n > stackTaints {
		// Check first, so that nothing is appended on failure.
		if !m.TaintsTolerated(taints, tolerations) {
			return dst, false
		}
		dst = grow(dst, n)
		for i := range taints {
			dst = append(dst, tolerations[m.firstTolerating(&taints[i], tolerations)])
		}
		return dst, true
	}
	var used [stackTaints]int
	for i := range taints {
		j := m.firstTolerating(&taints[i], tolerations)
		if j < 0 {
			return dst, false
		}
		used[i] = j
	}
	dst = grow(dst, n)
	for _, j := range used[:n] {
		dst = append(dst, tolerations[j])
	}
	return dst, true
}

// grow returns dst with room for n more elements; a nil or empty-capacity dst
// gets exactly n.
func grow(dst []v1.Toleration, n int) []v1.Toleration {
	if cap(dst) == 0 {
		return make([]v1.Toleration, 0, n)
	}
	return slices.Grow(dst, n)
}
