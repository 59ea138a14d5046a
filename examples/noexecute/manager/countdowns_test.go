package manager

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Go maps never shrink: after a peak of pods (a node failure) has gone, the
// memory of the peak must go too.
func TestCountdownsGiveMemoryBack(t *testing.T) {
	const n = 200_000
	c := newCountdowns()
	keys := make([]types.NamespacedName, n)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("pod-%d", i)}
	}
	nodes := make([]string, rebuildAt*4)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
	}
	taints := []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoExecute}}
	base := heapAfterGC()

	for i, k := range keys {
		c.setPod(k, podCountdown{pod: uint64(i) + 1, at: 1})
	}
	now := time.Now()
	for _, node := range nodes {
		c.observeTaints(node, append([]v1.Taint(nil), taints...), now)
	}
	full := heapAfterGC()
	for _, k := range keys[1:] {
		c.forgetPod(k)
	}
	for _, node := range nodes[1:] {
		c.forgetNode(node)
	}
	pods, nodeCount := c.sizes()
	require.Equal(t, 1, pods)
	require.Equal(t, 1, nodeCount)
	_, ok := c.pod(keys[0])
	assert.True(t, ok, "the entry left was lost in a rebuild")
	left := heapAfterGC()
	t.Logf("heap: %d KiB full, %d KiB after forgetting all but one (from %d KiB)", (full-base)>>10, int64(left-base)>>10, base>>10)
	// keys and nodes hold the strings; what is left beyond them is the maps.
	assert.Less(t, int64(left)-int64(base), int64(full-base)/10, "the maps kept the memory of their peak")
	runtime.KeepAlive(c)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(nodes)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
