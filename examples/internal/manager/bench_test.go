package manager_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/scale"
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
//	go test -run '^$' -bench 'EvictAll/nodes=5000' -benchtime 1x -count 3 ./examples/internal/manager/
//
// What the profiles of 5,000 nodes × 100 pods showed (issue 12: 670 MiB,
// 1.4 KB a pod, and 45k pods/s, measured as peak minus base), and what was
// done about it:
//
//   - Garbage. Log calls built their arguments when the level was off: the
//     variadic slices, a boxed key, a taint's ToString per pod in
//     reconcile, a boxed Decision and the "Deleting pod" line per eviction,
//     and event arguments with no Recorder: about 270 MB allocated per run.
//     Each is now built inside an Enabled or Recorder check. Each delete
//     event read the deleted pod (a lister miss: a NotFound error
//     allocated) and, after cancelling nothing, read it again
//     (handOverIfReplaced): 320 MB. A delete's item is now skipped when the
//     manager holds nothing for the pod (the pod's eviction forgot it), and
//     the re-read follows only a cancel that changed something. The lanes'
//     FIFOs, halving at a quarter down to 8 slots, reallocated every few
//     operations while a worker kept up with its adds (74 MB); they keep
//     256 slots.
//   - Live state. The countdowns map held 64-byte slots (namespace and
//     name, then 32 bytes): 55 MiB at 500,000 pods. Keyed by the key's
//     64-bit hash and with the rare first-sight time kept apart, a slot is
//     32 bytes: 37 MiB (500,000 is just past a doubling of the map).
//   - Lock waits. With the garbage gone, the mutex profile put 44 s of 147 s
//     of waiting on the countdowns' one mutex (every handler and eviction
//     looks a pod up); it is now 64 stripes. PodUpdated, which runs on the
//     informer's (here the cluster's serialised) write path, compared
//     tolerations by reflection; it now compares them field by field.
//   - GODEBUG=gctrace=1: "peak minus replay" is set by the collector's
//     pacing. The first cycle after the cluster is built starts at 1.3 GB,
//     1.7 times its 770 MiB, in both; in the run, with both cores busy, its
//     mark took 0.8–0.9 s against 0.3 s in the replay, and everything
//     allocated meanwhile counts as live, so the next goal was 1.5–1.7 GiB.
//     The figure follows what the manager allocates before that first
//     cycle ends more than what it keeps, and moves by ±100 B a pod from run
//     to run.
//
// What is left: the mutex profile puts 98% of the lock waits on the
// cluster's write lock (conditions and deletes copy a pod under it), which
// bounds the rate; the replay, one goroutine and no manager, does 400–650k
// pods/s. Of the manager's own live heap, the eviction queue's is the most
// (timedqueue: an 88-byte slab entry per pod, its index and heap: 60–95 MiB
// while the queue is full), then the countdowns (30–37 MiB) and the delete
// events queued while the node updates, which go first, are handled (up to
// 20 MiB). Most of what the manager still allocates is the queue's slab
// growing: 200 MB over a run, half of it before the first cycle above. The
// queue's slab, index and heap did not shrink when this was written: they
// were all of what was left once done (about 60 MiB).
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
