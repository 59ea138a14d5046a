package manager_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/noexecute/scale"
)

// BenchmarkEvictAll taints every node of a cluster at once, with pods that
// tolerate nothing, and measures until every pod is evicted, on a fake clock
// that never moves (every eviction is due at once). Beyond ns/op (which
// counts building the cluster too) it reports pods/s, the peak goroutines
// (the original started one per pod), the peak heap and the heap of the
// in-memory cluster itself; then, outside the timing, it replays the same
// cluster writes without a manager (scale.Replay) and reports the manager's
// own heap per pod, the run's peak minus the replay's, what it still holds
// once done (the run's heap left minus the replay's), and the replay's rate,
// the cluster's own bound. -short runs only the small size.
//
//	go test -run '^$' -bench 'EvictAll/nodes=5000' -benchtime 1x -count 3 ./examples/noexecute/manager/
func BenchmarkEvictAll(b *testing.B) {
	for _, size := range []struct{ nodes, pods int }{{50, 100}, {500, 100}, {5000, 100}} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", size.nodes, size.pods), func(b *testing.B) {
			if testing.Short() && size.nodes > 50 {
				b.Skip("-short: large sizes skipped")
			}
			opts := scale.Options{Nodes: size.nodes, PodsPerNode: size.pods, Logger: ptr.To(logr.Discard())}
			var last scale.Result
			for b.Loop() {
				res, err := scale.Run(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				last = res
			}
			b.StopTimer()
			runtime.GC()
			replay, err := scale.Replay(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(last.PodsPerSecond(), "pods/s")
			b.ReportMetric(float64(last.PeakGoroutines), "peak-goroutines")
			b.ReportMetric(float64(last.PeakHeap)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(last.BaseHeap)/(1<<20), "cluster-heap-MiB")
			b.ReportMetric(float64(scale.ManagerHeap(last, replay))/float64(last.Pods), "manager-B/pod")
			b.ReportMetric(float64(scale.ManagerHeapLeft(last, replay))/(1<<10), "manager-left-KiB")
			b.ReportMetric(replay.PodsPerSecond(), "replay-pods/s")
		})
	}
}
