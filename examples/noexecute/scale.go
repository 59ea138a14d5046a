package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"

	"github.com/taintkit/taintkit/examples/noexecute/scale"
)

// runScale taints nodes carrying podsPerNode untolerating pods each, all at
// once, and prints progress and a summary.
func runScale(out io.Writer, nodes, podsPerNode int, log logr.Logger) error {
	fmt.Fprintf(out, "Building %d nodes with %d pods each (%d pods), then tainting every node at once...\n",
		nodes, podsPerNode, nodes*podsPerNode)
	res, err := scale.Run(context.Background(), scale.Options{
		Nodes: nodes, PodsPerNode: podsPerNode, Logger: &log,
		Progress: func(evicted int, elapsed time.Duration) {
			fmt.Fprintf(out, "  %8d pods evicted after %v\n", evicted, elapsed.Round(time.Millisecond))
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Evicted %d pods in %v (%.0f pods/s).\n", res.Pods, res.Elapsed.Round(time.Millisecond),
		float64(res.Pods)/res.Elapsed.Seconds())
	fmt.Fprintf(out, "Goroutines: %d before, peak %d. Heap: %s with the cluster built, peak %s.\n",
		res.BaseGoroutines, res.PeakGoroutines, mib(res.BaseHeap), mib(res.PeakHeap))
	return nil
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
