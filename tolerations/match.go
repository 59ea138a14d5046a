package tolerations

import (
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Matcher matches tolerations against taints, safe to copy and to use
// concurrently; the zero Matcher matches as the package-level functions do.
type Matcher struct {
	ComparisonOperators bool // honour Lt and Gt, as k8s.io/api's enableComparisonOperators does
}

// ToleratesTaint reports whether toleration tolerates taint, exactly as
// Kubernetes does with comparison operators off ([Matcher.ToleratesTaint]).
func ToleratesTaint(toleration *v1.Toleration, taint *v1.Taint) bool {
	return Matcher{}.ToleratesTaint(toleration, taint)
}

// ToleratesTaint reports whether toleration tolerates taint, exactly as
// k8s.io/api's toleration.ToleratesTaint(logger, taint, m.ComparisonOperators)
// does, but without logging:
//
//   - a non-empty toleration Effect or Key must equal the taint's;
//   - operator "" or Equal: the values must be equal; Exists: any value;
//   - Lt (Gt), only with ComparisonOperators: the taint's value is less
//     (greater) than the toleration's, both strict decimal int64 integers
//     ("7", "-12"; never "+1", "01" or "-0"), else no match;
//   - any other operator, or a nil argument: no match.
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

// TaintsTolerated reports whether tolerations tolerate every taint (true for
// none), without allocating.
func TaintsTolerated(taints []v1.Taint, tolerations []v1.Toleration) bool {
	return Matcher{}.TaintsTolerated(taints, tolerations)
}

// TaintsTolerated reports whether tolerations tolerate every taint.
func (m Matcher) TaintsTolerated(taints []v1.Taint, tolerations []v1.Toleration) bool {
	for i := range taints {
		if m.firstTolerating(&taints[i], tolerations) < 0 {
			return false
		}
	}
	return true
}

// FirstUntoleratedTaint returns the first taint that no toleration tolerates
// (why a pod is evicted), and true; or the zero Taint and false.
func FirstUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration) (v1.Taint, bool) {
	return Matcher{}.FirstUntoleratedTaint(taints, tolerations)
}

// FirstUntoleratedTaint returns the first untolerated taint, and true.
func (m Matcher) FirstUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration) (v1.Taint, bool) {
	for i := range taints {
		if m.firstTolerating(&taints[i], tolerations) < 0 {
			return taints[i], true
		}
	}
	return v1.Taint{}, false
}

// GetMatchingTolerations reports whether tolerations tolerate every taint and
// returns the toleration used for each ([Matcher.GetMatchingTolerations]).
func GetMatchingTolerations(taints []v1.Taint, tolerations []v1.Toleration) (bool, []v1.Toleration) {
	return Matcher{}.GetMatchingTolerations(taints, tolerations)
}

// GetMatchingTolerations reports whether tolerations tolerate every taint and,
// if so, returns for each taint in order a copy of the first toleration that
// tolerates it. Otherwise, or with no taints, the slice is empty and non-nil.
func (m Matcher) GetMatchingTolerations(taints []v1.Taint, tolerations []v1.Toleration) (bool, []v1.Toleration) {
	n := len(taints)
	if n == 0 {
		return true, []v1.Toleration{}
	}
	if n > stackTaints {
		// A nil dst makes appendMatching allocate exactly n elements, and
		// only once every taint is known to be tolerated.
		used, ok := m.appendMatching(nil, taints, tolerations)
		if !ok {
			return false, []v1.Toleration{}
		}
		return true, used
	}
	// The common case, written out: match, then one allocation of exactly n
	// elements, filled by index (no append, no capacity checks). The
	// allocation is most of the cost: see BenchmarkGetMatchingTolerations.
	var used [stackTaints]int32
	for i := range taints {
		j := m.firstTolerating(&taints[i], tolerations)
		if j < 0 {
			return false, []v1.Toleration{}
		}
		used[i] = int32(j)
	}
	res := make([]v1.Toleration, n)
	for i := range res {
		res[i] = tolerations[used[i]]
	}
	return true, res
}

// AppendMatchingTolerations is [GetMatchingTolerations] for hot paths: it
// appends to dst, allocating nothing if dst has room. Like append, it returns
// the slice first ([Matcher.AppendMatchingTolerations]).
func AppendMatchingTolerations(dst []v1.Toleration, taints []v1.Taint, tolerations []v1.Toleration) ([]v1.Toleration, bool) {
	return Matcher{}.AppendMatchingTolerations(dst, taints, tolerations)
}

// AppendMatchingTolerations appends to dst what [Matcher.GetMatchingTolerations]
// would return, and true; or returns dst and false, having written nothing.
// dst must not share a backing array with tolerations.
func (m Matcher) AppendMatchingTolerations(dst []v1.Toleration, taints []v1.Taint, tolerations []v1.Toleration) ([]v1.Toleration, bool) {
	return m.appendMatching(dst, taints, tolerations)
}

// stackTaints is how many taints appendMatching handles with one matching
// pass, remembering the matches in a stack array. Nodes rarely carry more than
// a handful of NoExecute taints; beyond this it matches twice.
const stackTaints = 16

// appendMatching is AppendMatchingTolerations. Every copy into dst happens
// after every taint is known to be tolerated, so a failure leaves dst's
// backing array untouched; a nil dst gets exactly len(taints) elements.
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
	var used [stackTaints]int32
	for i := range taints {
		j := m.firstTolerating(&taints[i], tolerations)
		if j < 0 {
			return dst, false
		}
		used[i] = int32(j)
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
