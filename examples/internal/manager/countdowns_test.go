package manager

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/tolerations"
)

// Go maps never shrink: after a peak of pods (a node failure) has gone, the
// memory of the peak must go too. (The first sights of pods and taints are
// tolerations.Countdowns', whose own test checks them.)
func TestCountdownsGiveMemoryBack(t *testing.T) {
	const n = 200_000
	c := newCountdowns(clock.RealClock{}, tolerations.Matcher{})
	keys := make([]types.NamespacedName, n)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("pod-%d", i)}
	}
	base := heapAfterGC()

	for i, k := range keys {
		c.setPod(k, podCountdown{pod: uint64(i) + 1, at: 1})
	}
	full := heapAfterGC()
	for _, k := range keys[1:] {
		c.forgetPod(k)
	}
	pods, _, _ := c.sizes()
	require.Equal(t, 1, pods)
	_, ok := c.pod(keys[0])
	assert.True(t, ok, "the entry left was lost in a rebuild")
	left := heapAfterGC()
	t.Logf("heap: %d KiB full, %d KiB after forgetting all but one (from %d KiB)", (full-base)>>10, int64(left-base)>>10, base>>10)
	// keys hold the strings; what is left beyond them is the maps.
	assert.Less(t, int64(left)-int64(base), int64(full-base)/10, "the maps kept the memory of their peak")
	runtime.KeepAlive(c)
	runtime.KeepAlive(keys)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
