package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/go-logr/logr"

	"github.com/taintkit/taintkit/examples/internal/scale"
)

// runScale taints nodes carrying podsPerNode untolerating pods each, all at
// once, and prints progress and a summary; then it replays the same cluster
// writes without a manager and prints the manager's own heap.
func runScale(out io.Writer, nodes, podsPerNode int, log logr.Logger) error {
	fmt.Fprintf(out, "Building %d nodes with %d pods each (%d pods), then tainting every node at once...\n",
		nodes, podsPerNode, nodes*podsPerNode)
	opts := scale.Options{
		Nodes: nodes, PodsPerNode: podsPerNode, Logger: &log,
		Progress: func(evicted int, elapsed time.Duration) {
			fmt.Fprintf(out, "  %8d pods evicted after %v\n", evicted, elapsed.Round(time.Millisecond))
		},
	}
	res, err := scale.Run(context.Background(), opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Evicted %d pods in %v (%.0f pods/s).\n", res.Pods, res.Elapsed.Round(time.Millisecond),
		res.PodsPerSecond())
	fmt.Fprintf(out, "Goroutines: %d before, peak %d. Heap: %s with the cluster built, peak %s.\n",
		res.BaseGoroutines, res.PeakGoroutines, mib(res.BaseHeap), mib(res.PeakHeap))

	fmt.Fprintf(out, "Replaying the same cluster writes without a manager...\n")
	opts.Progress = nil
	runtime.GC() // the run's cluster is garbage now
	replay, err := scale.Replay(context.Background(), opts)
	if err != nil {
		return err
	}
	own := scale.ManagerHeap(res, replay)
	fmt.Fprintf(out, "Replay: %v (%.0f pods/s), peak heap %s. Manager's own heap: %s at the peak (%d B per pod), %s left after.\n",
		replay.Elapsed.Round(time.Millisecond), replay.PodsPerSecond(), mib(replay.PeakHeap),
		signedMiB(own), own/int64(res.Pods), signedMiB(scale.ManagerHeapLeft(res, replay)))
	return nil
}

func mib(b uint64) string { return signedMiB(int64(b)) }

func signedMiB(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
