package manager_test

import (
	"context"
	"strings"
	"sync"
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

// laggingPods is an informer's pod cache that can fall behind: while held,
// pod events are buffered, neither applied to the cache nor handed on.
type laggingPods struct {
	mu      sync.Mutex
	pods    map[string]*v1.Pod
	held    bool
	pending []func()
	on      func(old, new *v1.Pod)
}

func (l *laggingPods) event(old, new *v1.Pod) {
	apply := func() {
		l.mu.Lock()
		if new != nil {
			l.pods[new.Namespace+"/"+new.Name] = new
		} else {
			delete(l.pods, old.Namespace+"/"+old.Name)
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

func (l *laggingPods) hold(h bool) {
	l.mu.Lock()
	l.held = h
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, f := range pending {
		f()
	}
}

func (l *laggingPods) get(namespace, name string) (*v1.Pod, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.pods[namespace+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("pods"), name)
}

func (l *laggingPods) onNode(node string) ([]*v1.Pod, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*v1.Pod
	for _, p := range l.pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

// A pod decided again from a cache that has not yet seen its eviction is not
// evicted twice: no second "Marking for deletion", no second budget token.
func TestEvictedPodIsNotEvictedAgainFromALaggingCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		c := cluster.New(clk)
		cache := &laggingPods{pods: map[string]*v1.Pod{}}
		c.OnPod(cache.event)
		rec := &recorder{}
		m, err := manager.New(manager.Config{
			GetNode: c.GetNode, GetPod: cache.get, PodsOnNode: cache.onNode, Client: c,
			Recorder: rec, Clock: clk, Logger: ptr.To(logr.Discard()),
			EvictionRate: 1, EvictionBurst: 1,
		})
		require.NoError(t, err)
		cache.mu.Lock()
		cache.on = m.PodUpdated
		cache.mu.Unlock()
		c.OnNode(m.NodeUpdated)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); m.Run(ctx) }()
		defer func() { cancel(); <-done }()

		require.NoError(t, c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
		for _, name := range []string{"p0", "p1"} {
			_, err := c.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{NodeName: "n1"}})
			require.NoError(t, err)
		}
		synctest.Wait()
		cache.hold(true) // the pod informer falls behind
		require.NoError(t, c.SetTaints("n1", noExec))
		synctest.Wait()
		require.Equal(t, 1, c.NumPods(), "p0 went with the burst")
		// The node changes again; its handler reads p0 from the stale cache.
		require.NoError(t, c.SetTaints("n1", noExec, v1.Taint{Key: "other", Effect: v1.TaintEffectNoExecute}))
		synctest.Wait()
		clk.Step(5 * time.Second)
		synctest.Wait()
		cache.hold(false)
		synctest.Wait()
		clk.Step(5 * time.Second)
		synctest.Wait()

		assert.Equal(t, 0, c.NumPods())
		marking := 0
		for _, ev := range rec.take() {
			if strings.Contains(ev, "Marking for deletion Pod default/p0") {
				marking++
			}
		}
		assert.Equal(t, 1, marking, "p0 marked for deletion twice")
		s := m.Stats()
		assert.Equal(t, int64(1), s.BudgetWaits, "p0's second eviction waited for a token")
		assert.Equal(t, int64(2), s.Evicted)
	})
}
