package manager

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/tolerations"
)

// mayBeStale reports whether the decision d to evict pod may come from a
// node cache that is behind: the pod does not tolerate a node taint that,
// by its TimeAdded, was on the node before the pod was bound. The
// scheduler does not bind a pod to a node with a NoExecute taint it does
// not tolerate, so it did not see that taint: removed since, perhaps, with
// our node watch lagging (and a controller that evicted on it would evict a
// pod freshly and rightly placed). Only with Config.ReadNode, and never for
// pods bound before the taint (a zone outage's), nor for a device's taint.
func (m *Manager) mayBeStale(pod *v1.Pod, d tolerations.Decision) bool {
	if m.nodeReads == nil || d.Action != tolerations.EvictNow || !d.Untolerated || isDevice(d) || d.Taint.TimeAdded == nil {
		return false
	}
	bound, ok := tolerations.PodBoundAt(pod)
	return ok && bound.After(d.Taint.TimeAdded.Time)
}

// nodeReads reads nodes from the API server (Config.ReadNode), one read per
// node at a time, whose answer serves every eviction of the node's pods
// for NodeReadTTL: a burst of pods placed on a node costs one request.
type nodeReads struct {
	read1 func(ctx context.Context, name string) (*v1.Node, error)
	clock clock.PassiveClock
	count func()

	mu    sync.Mutex
	reads map[string]*nodeRead
}

// nodeRead is one read of a node: done is closed once node and err are set.
type nodeRead struct {
	done chan struct{}
	at   time.Time
	node *v1.Node
	err  error
}

func newNodeReads(read func(ctx context.Context, name string) (*v1.Node, error), clk clock.PassiveClock, count func()) *nodeReads {
	if read == nil {
		return nil
	}
	return &nodeReads{read1: read, clock: clk, count: count, reads: make(map[string]*nodeRead)}
}

// read returns the node as the API server has it: the answer of a read in
// flight, or of one made less than NodeReadTTL ago, or a new read's.
func (r *nodeReads) read(ctx context.Context, name string) (*v1.Node, error) {
	now := r.clock.Now()
	r.mu.Lock()
	e, ok := r.reads[name]
	if !ok || e.isDone() && now.Sub(e.at) >= NodeReadTTL {
		for n, old := range r.reads { // at most one entry per node read lately
			if old.isDone() && now.Sub(old.at) >= NodeReadTTL {
				delete(r.reads, n)
			}
		}
		e = &nodeRead{done: make(chan struct{})}
		r.reads[name] = e
		r.mu.Unlock()
		r.count()
		node, err := r.read1(ctx, name)
		r.mu.Lock()
		e.node, e.err, e.at = node, err, r.clock.Now()
		close(e.done)
		if err != nil {
			delete(r.reads, name) // a failure is not shared: the next asks again
		}
		r.mu.Unlock()
		return node, err
	}
	r.mu.Unlock()
	select {
	case <-e.done:
		return e.node, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *nodeRead) isDone() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}
