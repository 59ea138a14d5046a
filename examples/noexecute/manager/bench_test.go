package manager_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/noexecute/scale"
)

// BenchmarkEvictAll taints every node of a cluster at once, with pods that
// tolerate nothing, and measures until every pod is evicted, on the real
// clock. Beyond ns/op it reports pods/s, the peak goroutines (the original
// started one per pod) and the peak live heap, with the heap of the
// in-memory cluster itself for comparison. -short runs only the small size.
//
//	go test -run '^$' -bench EvictAll -benchtime 1x ./examples/noexecute/manager/
func BenchmarkEvictAll(b *testing.B) {
	for _, size := range []struct{ nodes, pods int }{{50, 100}, {5000, 100}} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", size.nodes, size.pods), func(b *testing.B) {
			if testing.Short() && size.nodes > 50 {
				b.Skip("-short: large size skipped")
			}
			var last scale.Result
			for b.Loop() {
				res, err := scale.Run(context.Background(), scale.Options{
					Nodes: size.nodes, PodsPerNode: size.pods,
					Logger: ptr.To(logr.Discard()),
				})
				if err != nil {
					b.Fatal(err)
				}
				last = res
			}
			b.ReportMetric(float64(last.Pods)/last.Elapsed.Seconds(), "pods/s")
			b.ReportMetric(float64(last.PeakGoroutines), "peak-goroutines")
			b.ReportMetric(float64(last.PeakHeap)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(last.BaseHeap)/(1<<20), "cluster-heap-MiB")
		})
	}
}
