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
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/tolerations"
)

// Options says how big a run is. Nodes and PodsPerNode must be positive.
type Options struct {
	Nodes       int
	PodsPerNode int
	// RealClock makes the manager and the cluster read the real clock. False
	// (the default) gives them a fake clock that never moves: every eviction
	// is due at once either way, so the run measures the manager's work,
	// not the runtime's timers.
	RealClock bool
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
	Elapsed time.Duration // wall-clock time from the first taint to the last eviction
	// PeakGoroutines and PeakHeap are the largest goroutine count and heap
	// (bytes of heap objects, live or not yet swept: runtime/metrics)
	// sampled every millisecond during the evictions; BaseGoroutines and
	// BaseHeap were sampled just before the first taint, with the cluster
	// built.
	PeakGoroutines, BaseGoroutines int
	PeakHeap, BaseHeap             uint64
	// LeftHeap is the live heap once every pod is gone and the manager,
	// still running, is done: nothing queued, nothing scheduled.
	LeftHeap uint64
}

// PodsPerSecond returns the eviction rate.
func (r Result) PodsPerSecond() float64 { return float64(r.Pods) / r.Elapsed.Seconds() }

// ManagerHeap returns the manager's own heap: the peak heap of run, a
// [Run], minus that of replay, a [Replay] of the same size. Both peaks
// include the garbage the cluster makes and the collector's headroom over
// what is live; the difference is what the manager adds, its garbage
// included. It may be negative in a run where the manager adds less than the
// noise of the collector's timing.
func ManagerHeap(run, replay Result) int64 { return int64(run.PeakHeap) - int64(replay.PeakHeap) }

// ManagerHeapLeft returns what the manager still holds once its work is
// done: run's LeftHeap minus replay's (the emptied cluster's maps keep their
// peak's memory in both). A manager whose per-pod state follows its work
// down leaves about nothing.
func ManagerHeapLeft(run, replay Result) int64 { return int64(run.LeftHeap) - int64(replay.LeftHeap) }

// t0 is where the fake clock stands.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// taint is the NoExecute taint every node gets; no pod tolerates it.
var taint = v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}

func nodeName(n int) string { return fmt.Sprintf("node-%05d", n) }

// build returns a cluster of opts.Nodes nodes with opts.PodsPerNode
// untolerating pods each.
func build(opts Options, clk clock.PassiveClock) (*cluster.Cluster, error) {
	if opts.Nodes <= 0 || opts.PodsPerNode <= 0 {
		return nil, fmt.Errorf("scale: Nodes and PodsPerNode must be positive, got %d and %d", opts.Nodes, opts.PodsPerNode)
	}
	c := cluster.New(clk)
	for n := range opts.Nodes {
		node := nodeName(n)
		if err := c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
			return nil, err
		}
		for p := range opts.PodsPerNode {
			if _, err := c.AddPod(&v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pod-%03d", node, p), Namespace: "default"},
				Spec:       v1.PodSpec{NodeName: node},
			}); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func clocks(opts Options) clock.Clock {
	if opts.RealClock {
		return clock.RealClock{}
	}
	return testingclock.NewFakeClock(t0)
}

// Run builds a cluster of opts.Nodes nodes with opts.PodsPerNode
// untolerating pods each, runs a manager on it, taints every node and waits
// until every pod is evicted or ctx ends.
func Run(ctx context.Context, opts Options) (Result, error) {
	clk := clocks(opts)
	c, err := build(opts, clk)
	if err != nil {
		return Result{}, err
	}
	m, err := manager.New(manager.Config{
		GetNode:    c.GetNode,
		GetPod:     c.GetPod,
		PodsOnNode: c.PodsOnNode,
		Client:     c,
		Clock:      clk,
		Logger:     opts.Logger,
	})
	if err != nil {
		return Result{}, err
	}
	c.OnNode(m.NodeUpdated)
	c.OnPod(m.PodUpdated)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(runCtx) }()
	defer func() { stop(); <-done }()

	return measure(ctx, opts, c, func() error {
		for n := range opts.Nodes {
			if err := c.SetTaints(nodeName(n), taint); err != nil {
				return err
			}
		}
		return nil
	}, func() error {
		// The last delete events may still be queued: wait for the
		// manager to handle them, as a measurement harness may (polling).
		for m.QueuedUpdates() > 0 || m.ScheduledEvictions() > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
}

// Replay makes the writes to the cluster that [Run] of the same opts makes,
// without a manager, and measures them as Run does: it builds the cluster,
// taints every node, then sets each pod's DisruptionTarget condition and
// deletes it with its UID as a precondition, as the manager does, one pod at
// a time. Its peak heap is the cluster's share of Run's: see [ManagerHeap].
// Its rate is what the cluster alone can do, a bound on Run's. opts.Logger is
// not used.
func Replay(ctx context.Context, opts Options) (Result, error) {
	c, err := build(opts, clocks(opts))
	if err != nil {
		return Result{}, err
	}
	cond := v1.PodCondition{
		Type:    v1.DisruptionTarget,
		Status:  v1.ConditionTrue,
		Reason:  tolerations.ReasonDeletionByTaintManager,
		Message: "Taint manager: deleting due to NoExecute taint",
	}
	return measure(ctx, opts, c, func() error {
		for n := range opts.Nodes {
			if err := c.SetTaints(nodeName(n), taint); err != nil {
				return err
			}
		}
		for n := range opts.Nodes {
			pods, _ := c.PodsOnNode(nodeName(n))
			for _, p := range pods {
				if err := ctx.Err(); err != nil {
					return err
				}
				uid := p.UID
				if err := c.SetPodCondition(ctx, p.Namespace, p.Name, uid, cond); err != nil {
					return err
				}
				err := c.DeletePod(ctx, p.Namespace, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
				if err != nil {
					return err
				}
			}
		}
		return nil
	}, func() error { return nil })
}

// measure samples goroutines and heap from just before act is called (it
// taints the nodes, and evicts the pods if no manager does) until every pod
// of c is deleted or ctx ends; then, once settle returns, the heap left.
func measure(ctx context.Context, opts Options, c *cluster.Cluster, act, settle func() error) (Result, error) {
	total := opts.Nodes * opts.PodsPerNode
	var evicted atomic.Int64
	allGone := make(chan struct{})
	c.OnPod(func(old, new *v1.Pod) {
		if new == nil && evicted.Add(1) == int64(total) {
			close(allGone)
		}
	})

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
	err := act()
	if err == nil {
		select {
		case <-allGone:
			res.Elapsed = time.Since(start)
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	close(sampling)
	wg.Wait()
	// One last sample: a peak in the last millisecond counts too.
	res.PeakHeap = max(res.PeakHeap, heapBytes())
	if err == nil && c.NumPods() != 0 {
		err = errors.New("scale: pods left after the last eviction")
	}
	if err == nil {
		err = settle()
	}
	if err == nil {
		runtime.GC()
		res.LeftHeap = heapBytes()
	}
	runtime.KeepAlive(c) // its emptied maps count in LeftHeap, as Run's manager keeps them
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
