package scale

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/examples/noexecute/cluster"
	"github.com/taintkit/taintkit/examples/noexecute/manager"
)

// Options says how big a run is. Nodes and PodsPerNode must be positive.
type Options struct {
	Nodes       int
	PodsPerNode int
	// Logger is the manager's logger. Nil means klog.Background(); a given
	// Logger is used as is.
	Logger *logr.Logger
	// Progress, if not nil, is called with the number of pods evicted so
	// far: about once a second of wall-clock time, when half the pods are
	// evicted and when all are, so that even a short run reports. Calls
	// come from goroutines of Run, one at a time.
	Progress func(evicted int, elapsed time.Duration)
}

// Result is what a run measured.
type Result struct {
	Pods    int           // pods evicted (all of them)
	Elapsed time.Duration // from the first taint to the last eviction
	// PeakGoroutines and PeakHeap are the largest goroutine count and live
	// heap (bytes of heap objects, runtime/metrics) sampled every
	// millisecond during the evictions; BaseGoroutines and BaseHeap were
	// sampled just before the first taint, with the cluster built.
	PeakGoroutines, BaseGoroutines int
	PeakHeap, BaseHeap             uint64
}

// Run builds a cluster of opts.Nodes nodes with opts.PodsPerNode
// untolerating pods each, runs a manager on it, taints every node and waits
// until every pod is evicted or ctx ends.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.Nodes <= 0 || opts.PodsPerNode <= 0 {
		return Result{}, fmt.Errorf("scale: Nodes and PodsPerNode must be positive, got %d and %d", opts.Nodes, opts.PodsPerNode)
	}
	c := cluster.New(nil)
	total := opts.Nodes * opts.PodsPerNode
	for n := range opts.Nodes {
		node := fmt.Sprintf("node-%05d", n)
		if err := c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
			return Result{}, err
		}
		for p := range opts.PodsPerNode {
			if _, err := c.AddPod(&v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pod-%03d", node, p), Namespace: "default"},
				Spec:       v1.PodSpec{NodeName: node},
			}); err != nil {
				return Result{}, err
			}
		}
	}

	m, err := manager.New(manager.Config{
		GetNode:    c.GetNode,
		GetPod:     c.GetPod,
		PodsOnNode: c.PodsOnNode,
		Client:     c,
		Logger:     opts.Logger,
	})
	if err != nil {
		return Result{}, err
	}
	var evicted atomic.Int64
	allGone := make(chan struct{})
	c.OnNode(m.NodeUpdated)
	c.OnPod(m.PodUpdated)
	c.OnPod(func(old, new *v1.Pod) {
		if new == nil && evicted.Add(1) == int64(total) {
			close(allGone)
		}
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(runCtx) }()
	defer func() { stop(); <-done }()

	runtime.GC()
	res := Result{Pods: total, BaseGoroutines: runtime.NumGoroutine(), BaseHeap: heapBytes()}
	res.PeakGoroutines, res.PeakHeap = res.BaseGoroutines, res.BaseHeap

	var wg sync.WaitGroup
	sampling := make(chan struct{})
	wg.Go(func() {
		// Sampling needs a ticker on the wall clock: this is a measurement
		// harness, not library code.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		lastReport, halfway := start, false
		for {
			select {
			case <-sampling:
				return
			case now := <-tick.C:
				res.PeakGoroutines = max(res.PeakGoroutines, runtime.NumGoroutine())
				res.PeakHeap = max(res.PeakHeap, heapBytes())
				n := int(evicted.Load())
				if opts.Progress != nil && (now.Sub(lastReport) >= time.Second || !halfway && 2*n >= total) {
					lastReport, halfway = now, halfway || 2*n >= total
					opts.Progress(n, now.Sub(start))
				}
			}
		}
	})

	start := time.Now()
	taint := v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}
	for n := range opts.Nodes {
		if err := c.SetTaints(fmt.Sprintf("node-%05d", n), taint); err != nil {
			close(sampling)
			wg.Wait()
			return res, err
		}
	}
	select {
	case <-allGone:
		res.Elapsed = time.Since(start)
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(sampling)
	wg.Wait()
	if err == nil && c.NumPods() != 0 {
		err = errors.New("scale: pods left after the last eviction")
	}
	if err == nil && opts.Progress != nil {
		opts.Progress(total, res.Elapsed)
	}
	return res, err
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// heapBytes returns the bytes of live and not yet swept heap objects,
// without stopping the world (runtime.ReadMemStats would).
func heapBytes() uint64 {
	metrics.Read(heapSample)
	return heapSample[0].Value.Uint64()
}
