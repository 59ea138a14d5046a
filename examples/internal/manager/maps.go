package manager

// rebuildAt is the smallest peak size after which a map that has shrunk to a
// quarter of its peak is rebuilt: Go maps never give memory back. Copying
// the quarter that is left costs less than the deletions that shrank it, so
// the rebuilds are amortised O(1) per deletion, and a size hovering around
// a quarter of the peak rebuilds once, not at every step: the rebuilt map's
// peak is its size, a quarter of which is far below.
const rebuildAt = 256

// rebuildIfShrunk returns m, or a copy of m sized to fit if m has shrunk to a
// quarter of a peak of at least rebuildAt entries, or is empty after a peak
// of more than one group of entries; *peak is then reset.
func rebuildIfShrunk[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if (*peak < rebuildAt || len(m) > *peak/4) && (len(m) > 0 || *peak <= 8) {
		return m
	}
	fresh := make(map[K]V, len(m))
	for k, v := range m {
		fresh[k] = v
	}
	*peak = len(fresh)
	return fresh
}
