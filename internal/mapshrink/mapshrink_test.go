package mapshrink

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The policies tolerations.Countdowns and sharding's lanes use rebuild a map
// exactly when their rules say: Countdowns' stripes once down to a quarter
// of a peak of at least 256 entries, or empty after more than one group;
// a lane once down to a quarter of a peak of at least 1024 items.
func TestShrunkAsCountdownsAndLanesNeed(t *testing.T) {
	countdowns := Policy{MinPeak: 256, FreeEmpty: true}
	countdownsRule := func(n, peak int) bool { // rebuilt unless kept
		return !((peak < 256 || n > peak/4) && (n > 0 || peak <= 8))
	}
	lanes := Policy{MinPeak: 1024}
	lanesRule := func(n, peak int) bool {
		return !(peak < 1024 || n > peak/4)
	}
	for peak := range 5000 {
		for n := 0; n <= peak; n += 1 + n/64 {
			if got, want := countdowns.shrunk(n, peak), countdownsRule(n, peak); got != want {
				t.Fatalf("countdowns: shrunk(%d, %d) = %v, want %v", n, peak, got, want)
			}
			if got, want := lanes.shrunk(n, peak), lanesRule(n, peak); got != want {
				t.Fatalf("lanes: shrunk(%d, %d) = %v, want %v", n, peak, got, want)
			}
		}
	}
}

func TestShrunk(t *testing.T) {
	for _, tc := range []struct {
		p       Policy
		n, peak int
		want    bool
	}{
		{Policy{MinPeak: 100}, 25, 100, true},
		{Policy{MinPeak: 100}, 26, 100, false}, // more than a quarter left
		{Policy{MinPeak: 100}, 0, 99, false},   // below MinPeak, even empty
		{Policy{MinPeak: 100}, 0, 100, true},
		{Policy{MinPeak: 100, FreeEmpty: true}, 0, 9, true},  // empty after more than one group
		{Policy{MinPeak: 100, FreeEmpty: true}, 0, 8, false}, // one group: nothing to give back
		{Policy{MinPeak: 100, FreeEmpty: true}, 1, 99, false},
		{Policy{}, 0, 0, true}, // MinPeak 0: every map down to a quarter, an empty one too
	} {
		assert.Equal(t, tc.want, tc.p.shrunk(tc.n, tc.peak), "%+v.shrunk(%d, %d)", tc.p, tc.n, tc.peak)
	}
}

func TestFitKeepsEntriesAndResetsPeak(t *testing.T) {
	p := Policy{MinPeak: 16}
	m, peak := map[string]int{}, 0
	for i := range 100 {
		m[fmt.Sprint(i)] = i
		peak = max(peak, len(m))
	}
	first := m
	for i := range 74 {
		delete(m, fmt.Sprint(i))
		m = Fit(p, m, &peak)
	}
	require.True(t, sameMap(first, m), "rebuilt with more than a quarter left")
	require.Equal(t, 100, peak)

	delete(m, "74")
	m = Fit(p, m, &peak)
	assert.False(t, sameMap(first, m), "not rebuilt at a quarter of its peak")
	assert.Equal(t, 25, peak, "the copy's peak is its size")
	require.Len(t, m, 25)
	for i := 75; i < 100; i++ {
		assert.Equal(t, i, m[fmt.Sprint(i)], "entry %d", i)
	}
}

func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// A map that empties gives its memory back; one whose size then hovers
// around a quarter of its new peak is not rebuilt at every step.
func TestFitGivesMemoryBackOnceAndDoesNotThrash(t *testing.T) {
	const n = 200_000
	p := Policy{MinPeak: 1024}
	base := heapAfterGC()
	m, peak := make(map[int]int), 0
	for i := range n {
		m[i] = i
		peak = max(peak, len(m))
	}
	full := heapAfterGC()
	for i := range n - 3 {
		delete(m, i)
		m = Fit(p, m, &peak)
	}
	left := heapAfterGC()
	t.Logf("heap: %d KiB with %d entries, %d KiB with %d", (full-base)>>10, n, int64(left-base)>>10, len(m))
	assert.Less(t, int64(left)-int64(base), int64(full-base)/100, "the map kept the memory of its peak")
	runtime.KeepAlive(m)

	h, peak := make(map[int]int), 0
	for i := range 4 * p.MinPeak {
		h[i] = i
		peak = max(peak, len(h))
	}
	for i := range 3 * p.MinPeak {
		delete(h, i)
		h = Fit(p, h, &peak)
	}
	next := 4 * p.MinPeak
	allocs := testing.AllocsPerRun(10_000, func() {
		h[next] = next
		peak = max(peak, len(h))
		delete(h, next-p.MinPeak)
		h = Fit(p, h, &peak)
		next++
	})
	assert.Less(t, allocs, 0.01, "a map hovering around a quarter of its peak is rebuilt at every step")
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
