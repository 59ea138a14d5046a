// Package mapshrink gives back the memory of a Go map that has shrunk, for
// tolerations.Countdowns and the lanes of sharding. A Go map never shrinks:
// deleting entries keeps the slots its peak needed. Rebuilding it to fit
// once it is down to a quarter of its peak gives them back at an amortised
// O(1) per deletion.
package mapshrink

// smallMap is how many entries a Go map holds in its first group of slots:
// one that never held more has no memory worth giving back.
const smallMap = 8

// Policy says when a map that has shrunk is rebuilt to fit.
type Policy struct {
	// MinPeak is the smallest peak after which a map down to a quarter of
	// it is rebuilt. Below it, a map keeps its memory: at most MinPeak
	// entries' worth beyond what it holds, which a map that empties and
	// fills again all the time reuses rather than allocates again.
	MinPeak int
	// FreeEmpty also rebuilds a map that is empty after a peak of more than
	// one group of slots, whatever MinPeak, so that a map that seldom
	// empties gives back all its memory when it does.
	FreeEmpty bool
}

// Fit returns m, or, if m has shrunk as p says, a copy of m sized to fit,
// and then sets *peak to the copy's size. *peak is the largest len(m) since
// m was made: the caller raises it on every insert, and calls Fit after
// every deletion.
//
// The copy of the quarter left costs less than the three quarters of the
// peak deleted since m was made, so rebuilds are amortised O(1) per
// deletion; and the copy's peak is its size, so a map whose size hovers
// around a quarter of its peak is rebuilt once, not at every step.
func Fit[K comparable, V any](p Policy, m map[K]V, peak *int) map[K]V {
	if !p.shrunk(len(m), *peak) {
		return m
	}
	return rebuild(m, peak)
}

// shrunk reports whether a map of n entries, whose size peaked at peak, has
// shrunk enough to be rebuilt.
func (p Policy) shrunk(n, peak int) bool {
	if n > peak/4 {
		return false
	}
	return peak >= p.MinPeak || p.FreeEmpty && n == 0 && peak > smallMap
}

func rebuild[K comparable, V any](m map[K]V, peak *int) map[K]V {
	fresh := make(map[K]V, len(m))
	for k, v := range m {
		fresh[k] = v
	}
	*peak = len(fresh)
	return fresh
}
