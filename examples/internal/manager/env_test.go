package manager_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// env is a cluster, a manager fed by the cluster's change handlers, and a
// fake clock, all in one synctest bubble.
type env struct {
	t   *testing.T
	clk *testingclock.FakeClock
	c   *cluster.Cluster
	rec *recorder

	mu     sync.Mutex
	m      *manager.Manager
	paused bool // drop events, as a disconnected informer would
	stop   func()
}

type recorder struct {
	mu     sync.Mutex
	events []string
	refs   []*v1.ObjectReference // the object of each event, in order
}

func (r *recorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s", eventtype, reason, fmt.Sprintf(format, args...)))
	ref, _ := obj.(*v1.ObjectReference)
	r.refs = append(r.refs, ref)
}

// takeRefs returns the objects of the events recorded since the last call.
func (r *recorder) takeRefs() []*v1.ObjectReference {
	r.mu.Lock()
	defer r.mu.Unlock()
	refs := r.refs
	r.refs = nil
	return refs
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

func testLogger(t *testing.T) logr.Logger {
	return funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{Verbosity: 4})
}

// newEnv must be called inside synctest.Test.
func newEnv(t *testing.T, tweak ...func(*manager.Config)) *env {
	e := &env{t: t, clk: testingclock.NewFakeClock(t0), rec: &recorder{}}
	e.c = cluster.New(e.clk)
	e.c.OnNode(func(old, new *v1.Node) {
		if m := e.current(); m != nil {
			m.NodeUpdated(old, new)
		}
	})
	e.c.OnPod(func(old, new *v1.Pod) {
		if m := e.current(); m != nil {
			m.PodUpdated(old, new)
		}
	})
	e.start(tweak...)
	t.Cleanup(e.stopManager)
	return e
}

func (e *env) current() *manager.Manager {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused {
		return nil
	}
	return e.m
}

// start starts a manager and replays the cluster's objects to it, as an
// informer's initial list does.
func (e *env) start(tweak ...func(*manager.Config)) {
	cfg := manager.Config{
		GetNode:       e.c.GetNode,
		GetPod:        e.c.GetPod,
		PodsOnNode:    e.c.PodsOnNode,
		Client:        e.c,
		Recorder:      e.rec,
		Clock:         e.clk,
		Logger:        ptr.To(testLogger(e.t)),
		EvictionRetry: timedqueue.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: time.Minute},
	}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := manager.New(cfg)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	e.mu.Lock()
	e.m = m
	e.stop = func() { cancel(); <-done }
	e.mu.Unlock()
	for _, n := range e.c.ListNodes() {
		m.NodeUpdated(nil, n)
	}
	for _, p := range e.c.ListPods() {
		m.PodUpdated(nil, p)
	}
	synctest.Wait()
}

// stopManager stops the manager, as a controller restart does.
func (e *env) stopManager() {
	e.mu.Lock()
	stop := e.stop
	e.m, e.stop = nil, nil
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (e *env) pause(p bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.paused = p
}

// step moves the fake clock and lets everything it caused finish.
func (e *env) step(d time.Duration) {
	e.clk.Step(d)
	synctest.Wait()
}

func (e *env) settle() { synctest.Wait() }

func (e *env) addNode(name string) {
	require.NoError(e.t, e.c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	e.settle()
}

var noExec = v1.Taint{Key: "node.kubernetes.io/unreachable", Effect: v1.TaintEffectNoExecute}

func (e *env) taint(node string, taints ...v1.Taint) {
	if len(taints) == 0 {
		taints = []v1.Taint{noExec}
	}
	require.NoError(e.t, e.c.SetTaints(node, taints...))
	e.settle()
}

func (e *env) untaint(node string) {
	require.NoError(e.t, e.c.SetTaints(node))
	e.settle()
}

// tolerating returns the toleration of noExec for secs seconds; secs < 0
// means forever.
func tolerating(secs int64) []v1.Toleration {
	tol := v1.Toleration{Key: noExec.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	if secs >= 0 {
		tol.TolerationSeconds = ptr.To(secs)
	}
	return []v1.Toleration{tol}
}

func (e *env) addPod(name, node string, tols []v1.Toleration) *v1.Pod {
	p, err := e.c.AddPod(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.PodSpec{NodeName: node, Tolerations: tols},
	})
	require.NoError(e.t, err)
	e.settle()
	return p
}

func (e *env) exists(name string) bool {
	_, err := e.c.GetPod("default", name)
	return err == nil
}

func (e *env) pod(name string) *v1.Pod {
	p, err := e.c.GetPod("default", name)
	require.NoError(e.t, err)
	return p
}

func (e *env) manager() *manager.Manager {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m
}
