package manager_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// A model of what Pending shows, checked after every step of random
// histories: pods added with various tolerations, deleted, their nodes
// tainted and untainted (which cancels), the clock stepped; each eviction
// through the Eviction API answered at random, per pod, by success, a
// disruption budget's refusal, an error, a panic or a runtime.Goexit.

// outcome is how chaosEvicter answers an eviction.
type outcome int

const (
	outEvicted outcome = iota
	outRefused
	outFailed
	outPanicked
	outGoexited
)

// call is one EvictPod call: the pod, when, and the answer.
type call struct {
	name string
	at   time.Time
	out  outcome
}

// chaosEvicter answers each pod's evictions from the pod's own random
// sequence (so a pod's answers do not depend on how calls for several pods
// interleave), and logs every call.
type chaosEvicter struct {
	*cluster.Cluster
	clk interface{ Now() time.Time }

	mu    sync.Mutex
	rngs  map[string]*rand.Rand
	calls []call
}

func (c *chaosEvicter) EvictPod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	c.mu.Lock()
	// Weights: a fifth each, with success and refusals a little likelier.
	out := []outcome{outEvicted, outEvicted, outRefused, outRefused, outFailed, outPanicked, outGoexited}[c.rngs[name].IntN(7)]
	c.calls = append(c.calls, call{name, c.clk.Now(), out})
	c.mu.Unlock()
	switch out {
	case outRefused:
		return budgetRefusal()
	case outFailed:
		return errors.New("etcdserver: request timed out")
	case outPanicked:
		panic("client panic on " + name)
	case outGoexited:
		runtime.Goexit()
	}
	return c.Cluster.EvictPod(ctx, ns, name, opts)
}

func (c *chaosEvicter) takeCalls() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

// podModel is what the model expects of a pod's eviction.
type podModel struct {
	node      string
	tols      []v1.Toleration
	boundAt   time.Time
	scheduled bool
	deadline  time.Time
	next      time.Time // when its next attempt is due
	failures  int       // the queue's failed attempts of the schedule
	refusals  int
	lastErr   string
	// failingSince is when an attempt first failed with an error (a
	// refusal, a panic or a Goexit does not count).
	failingSince time.Time
	gaveUp       bool // its last eviction was given up (Pending may list it as Failed)
}

var modelRetry = timedqueue.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second}

func TestPendingMatchesTheModelThroughFailures(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { playPendingModel(t, seed) })
		})
	}
}

func playPendingModel(t *testing.T, seed uint64) {
	var ev *chaosEvicter
	e := newEnv(t, func(c *manager.Config) {
		ev = &chaosEvicter{Cluster: c.Client.(*cluster.Cluster), clk: c.Clock, rngs: map[string]*rand.Rand{}}
		c.Client, c.UseEvictionAPI = ev, true
		c.EvictionRetry = modelRetry
		c.Logger, c.Recorder = ptr.To(logr.Discard()), nil
	})
	rng := rand.New(rand.NewPCG(seed, 23))
	nodes := []string{"n1", "n2", "n3"}
	tainted := map[string]bool{}
	for _, n := range nodes {
		e.addNode(n)
	}
	model := map[string]*podModel{}
	// decide schedules the pod's eviction afresh, as a handler does on a
	// tainted node.
	decide := func(p *podModel) {
		*p = podModel{node: p.node, tols: p.tols, boundAt: p.boundAt}
		if !tainted[p.node] {
			return
		}
		n, err := e.c.GetNode(p.node)
		require.NoError(t, err)
		d := tolerations.Decide(n.Spec.Taints, p.tols, p.boundAt, e.clk.Now())
		if d.Action != tolerations.Never {
			p.scheduled, p.deadline, p.next = true, d.At, d.At
		}
	}
	var wantRefused, wantFailed int64
	seen := map[outcome]int{}
	abortedAfterRefusal := 0 // panics and Goexits of evictions refused before
	next := 0
	for step := range 400 {
		var did string
		switch op := rng.IntN(10); {
		case op < 3:
			name := fmt.Sprintf("p%d", next)
			next++
			ev.mu.Lock()
			ev.rngs[name] = rand.New(rand.NewPCG(seed, uint64(next)))
			ev.mu.Unlock()
			var tols []v1.Toleration
			switch rng.IntN(4) {
			case 0:
				tols = tolerating(-1)
			case 1, 2:
				tols = tolerating(int64(rng.IntN(30)))
			}
			p := &podModel{node: nodes[rng.IntN(len(nodes))], tols: tols}
			p.boundAt, _ = tolerations.PodBoundAt(e.addPod(name, p.node, tols)) // may be evicted at once
			decide(p)
			model[name] = p
			did = "add " + name + " on " + p.node
		case op < 4:
			pods := e.c.ListPods()
			if len(pods) == 0 {
				continue
			}
			name := pods[rng.IntN(len(pods))].Name
			require.NoError(t, e.c.DeletePod(context.Background(), "default", name, metav1.DeleteOptions{}))
			e.settle()
			delete(model, name)
			did = "delete " + name
		case op < 6:
			n := nodes[rng.IntN(len(nodes))]
			tainted[n] = !tainted[n]
			if tainted[n] {
				e.taint(n)
			} else {
				e.untaint(n)
			}
			for _, p := range model {
				if p.node == n {
					decide(p)
				}
			}
			did = fmt.Sprintf("taint %s: %v", n, tainted[n])
		default:
			e.step(time.Duration(rng.IntN(40)) * 250 * time.Millisecond)
			did = fmt.Sprintf("step to +%v", e.clk.Since(t0))
		}
		now := e.clk.Now()
		for _, c := range ev.takeCalls() { // in order for each pod
			seen[c.out]++
			p := model[c.name]
			require.NotNil(t, p, "step %d (%s): %s evicted, not in the model", step, did, c.name)
			require.True(t, p.scheduled, "step %d (%s): %s evicted with no eviction scheduled", step, did, c.name)
			require.False(t, c.at.Before(p.next), "step %d (%s): %s evicted at +%v, due at +%v", step, did, c.name, c.at.Sub(t0), p.next.Sub(t0))
			require.True(t, c.at.Equal(now))
			switch c.out {
			case outEvicted:
				delete(model, c.name)
				continue
			case outRefused:
				wantRefused++
				p.refusals++
				p.lastErr = budgetRefusal().Error()
				p.next = c.at.Add(modelRetry.Backoff(p.refusals))
				continue
			case outFailed:
				p.lastErr = "manager: evict pod default/" + c.name + ": etcdserver: request timed out"
				if p.failingSince.IsZero() {
					p.failingSince = c.at
				}
			case outPanicked:
				p.lastErr = "timedqueue: panic: client panic on " + c.name
			case outGoexited:
				p.lastErr = "timedqueue: work func called runtime.Goexit"
			}
			if c.out != outFailed && p.refusals > 0 {
				abortedAfterRefusal++
			}
			p.failures++
			if p.failures == modelRetry.MaxAttempts {
				// Given up: the pod stays, decided afresh on its next update.
				wantFailed++
				*p = podModel{node: p.node, tols: p.tols, boundAt: p.boundAt, gaveUp: true}
				continue
			}
			p.next = c.at.Add(modelRetry.Backoff(p.failures))
		}
		checkPendingModel(t, e, model, fmt.Sprintf("step %d (%s)", step, did))
	}
	s := e.manager().Stats()
	assert.Equal(t, wantRefused, s.Refused)
	assert.Equal(t, wantFailed, s.Failed)
	assert.Positive(t, wantFailed, "the history should give up on some evictions")
	assert.Len(t, seen, 5, "the history should have every answer")
	assert.Positive(t, abortedAfterRefusal, "the history should abort an eviction refused before")
}

func checkPendingModel(t *testing.T, e *env, model map[string]*podModel, at string) {
	t.Helper()
	now := e.clk.Now()
	want := []manager.PendingEviction{}
	for name, p := range model {
		if !p.scheduled {
			continue
		}
		require.True(t, p.next.After(now), "%s: %s due at +%v and not attempted", at, name, p.next.Sub(t0))
		want = append(want, manager.PendingEviction{Namespace: "default", Name: name, UID: e.pod(name).UID, Node: p.node,
			Deadline: p.deadline, Attempts: p.failures + p.refusals, LastError: p.lastErr, FailingSince: p.failingSince})
		w, ok := e.manager().ScheduledEviction("default", name)
		require.True(t, ok, "%s: %s not scheduled", at, name)
		require.True(t, p.next.Equal(w.NextAttempt), "%s: %s next attempt at +%v, want +%v", at, name, w.NextAttempt.Sub(t0), p.next.Sub(t0))
		require.Equal(t, p.failures, w.Attempts, "%s: %s: the queue's failed attempts", at, name)
	}
	got := []manager.PendingEviction{}
	for _, g := range e.manager().Pending() {
		if g.Failed {
			// Listed until the pod is decided again: only one given up.
			p := model[g.Name]
			require.True(t, p != nil && p.gaveUp && !p.scheduled, "%s: %s listed as given up", at, g.Name)
			continue
		}
		require.Equal(t, noExec.Key, g.Taint.Key, "%s: %s", at, g.Name)
		g.Taint = v1.Taint{}
		got = append(got, g)
	}
	slices.SortFunc(want, func(a, b manager.PendingEviction) int {
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	require.Equal(t, want, got, at)
}
