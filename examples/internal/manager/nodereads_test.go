package manager_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// laggingNodes is an informer's node cache that can fall behind: while
// held, node events are buffered, neither applied nor handed on.
type laggingNodes struct {
	mu      sync.Mutex
	nodes   map[string]*v1.Node
	held    bool
	pending []func()
	on      func(old, new *v1.Node)
}

func (l *laggingNodes) event(old, new *v1.Node) {
	apply := func() {
		l.mu.Lock()
		if new != nil {
			l.nodes[new.Name] = new
		} else {
			delete(l.nodes, old.Name)
		}
		on := l.on
		l.mu.Unlock()
		if on != nil {
			on(old, new)
		}
	}
	l.mu.Lock()
	if l.held {
		l.pending = append(l.pending, apply)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	apply()
}

func (l *laggingNodes) hold(h bool) {
	l.mu.Lock()
	l.held = h
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, f := range pending {
		f()
	}
}

func (l *laggingNodes) get(name string) (*v1.Node, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.nodes[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("nodes"), name)
}

// nodeReadEnv is a cluster whose node informer may lag, a manager on it
// that reads nodes from the cluster itself (the API server) when it must,
// and a count of those reads.
type nodeReadEnv struct {
	clk   *testingclock.FakeClock
	c     *cluster.Cluster
	nodes *laggingNodes
	m     *manager.Manager
	reads atomic.Int64
}

// newNodeReadEnv must be called inside synctest.Test.
func newNodeReadEnv(t *testing.T) *nodeReadEnv {
	e := &nodeReadEnv{clk: testingclock.NewFakeClock(t0), nodes: &laggingNodes{nodes: map[string]*v1.Node{}}}
	e.c = cluster.New(e.clk)
	e.c.OnNode(e.nodes.event)
	m, err := manager.New(manager.Config{
		GetNode: e.nodes.get, GetPod: e.c.GetPod, PodsOnNode: e.c.PodsOnNode, Client: e.c,
		ReadNode: func(ctx context.Context, name string) (*v1.Node, error) {
			e.reads.Add(1)
			return e.c.GetNode(name)
		},
		Recorder: &recorder{}, Clock: e.clk, Logger: ptr.To(logr.Discard()),
	})
	require.NoError(t, err)
	e.m = m
	e.nodes.mu.Lock()
	e.nodes.on = m.NodeUpdated
	e.nodes.mu.Unlock()
	e.c.OnPod(m.PodUpdated)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.NoError(t, e.c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
	synctest.Wait()
	return e
}

func (e *nodeReadEnv) addPods(t *testing.T, names ...string) {
	for _, name := range names {
		_, err := e.c.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{NodeName: "n1"}})
		require.NoError(t, err)
	}
	synctest.Wait()
}

// A node's taint is removed, and the scheduler binds new pods there, but the
// controller's node watch lags: it still sees the taint when the pods'
// updates reach it. The pods were bound after the taint's TimeAdded, so the
// scheduler did not see that taint: the manager reads the node (once for
// the burst) and, the taint being gone, evicts none of them.
func TestStaleNodeIsReadBeforeEvicting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newNodeReadEnv(t)
		require.NoError(t, e.c.SetTaints("n1", noExec))
		synctest.Wait()
		e.clk.Step(10 * time.Second)
		synctest.Wait()

		e.nodes.hold(true) // the node watch falls behind
		require.NoError(t, e.c.SetTaints("n1"))
		e.clk.Step(time.Second)
		e.addPods(t, "new-0", "new-1", "new-2", "new-3", "new-4")
		assert.Equal(t, 5, e.c.NumPods(), "a pod bound after its taint was removed was evicted on a stale node")
		assert.Equal(t, int64(1), e.reads.Load(), "one read of the node serves the burst")

		e.nodes.hold(false)
		synctest.Wait()
		e.clk.Step(time.Minute)
		synctest.Wait()
		assert.Equal(t, 5, e.c.NumPods())
		assert.Equal(t, int64(0), e.m.Stats().Evicted)
	})
}

// The same burst, with the taint still on the node when read: the pods do
// not tolerate it, and go.
func TestStaleNodeReadThatStillHasTheTaintEvicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newNodeReadEnv(t)
		require.NoError(t, e.c.SetTaints("n1", noExec))
		synctest.Wait()
		e.clk.Step(10 * time.Second)
		synctest.Wait()
		e.addPods(t, "late-0", "late-1", "late-2")
		assert.Equal(t, 0, e.c.NumPods())
		assert.Equal(t, int64(1), e.reads.Load())
		assert.Equal(t, int64(3), e.m.Stats().Evicted)
	})
}

// A zone outage: the pods were on their nodes before the taint, as the
// scheduler saw them. Their evictions read nothing.
func TestPodsBoundBeforeTheTaintCostNoRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newNodeReadEnv(t)
		e.addPods(t, "web-0", "web-1", "web-2", "web-3")
		e.clk.Step(time.Hour)
		synctest.Wait()
		require.NoError(t, e.c.SetTaints("n1", noExec))
		synctest.Wait()
		assert.Equal(t, 0, e.c.NumPods())
		assert.Equal(t, int64(0), e.reads.Load(), "the zone outage's evictions read nodes")
	})
}
