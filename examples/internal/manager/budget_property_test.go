package manager_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
)

// What a chaos client does with a pod's first delete.
const (
	callNormal = iota
	callBlocks // for a while on the clock, or until its ctx ends
	callPanics
	callFails
	callGoexits
	numCallKinds
)

// chaosClient is a PodClient that records every eviction's start (its first
// write, the DisruptionTarget condition) and misbehaves on a pod's first
// delete as told.
type chaosClient struct {
	*cluster.Cluster
	e *env

	mu          sync.Mutex
	starts      []evictionStart
	kind        map[types.NamespacedName]int
	called      map[types.NamespacedName]bool
	incarnation int
	calm        bool // misbehave no more
}

type evictionStart struct {
	at          time.Time
	key         types.NamespacedName
	incarnation int
}

func (c *chaosClient) SetPodCondition(ctx context.Context, namespace, name string, uid types.UID, cond v1.PodCondition) error {
	c.mu.Lock()
	c.starts = append(c.starts, evictionStart{c.e.clk.Now(), types.NamespacedName{Namespace: namespace, Name: name}, c.incarnation})
	c.mu.Unlock()
	return c.Cluster.SetPodCondition(ctx, namespace, name, uid, cond)
}

func (c *chaosClient) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	c.mu.Lock()
	kind := c.kind[key]
	if c.called[key] || c.calm {
		kind = callNormal
	}
	c.called[key] = true
	c.mu.Unlock()
	switch kind {
	case callBlocks:
		select {
		case <-c.e.clk.After(7 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	case callPanics:
		panic("chaos: delete panicked")
	case callFails:
		return errors.New("chaos: delete failed")
	case callGoexits:
		runtime.Goexit()
	}
	return c.Cluster.DeletePod(ctx, namespace, name, opts)
}

// The budget's promise, on random histories with slow, failing, panicking
// and exiting deletes, deadlines that move while pods wait for a token,
// cancellations, restarts (a Shutdown mid-wait) and Shutdown at the end:
//   - in every window of every length, per bucket and manager incarnation,
//     evictions started ≤ burst + rate × length;
//   - every pod that must go is evicted, and Run returns at every restart;
//   - with slots to spare, evictions that nothing disturbed start in
//     deadline order within a bucket (simultaneous starts aside).
func TestBudgetProperties(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { budgetHistory(t, seed) })
		})
	}
}

func budgetHistory(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	rate := []float64{0.5, 1, 2, 5}[rng.IntN(4)]
	burst := 1 + rng.IntN(3)
	perNS := rng.IntN(2) == 0
	ample := seed%2 == 0 // slots to spare: starts follow token order
	slots := 1 + rng.IntN(3)
	if ample {
		slots = 100
	}
	client := &chaosClient{kind: map[types.NamespacedName]int{}, called: map[types.NamespacedName]bool{}}
	e := newEnv(t, func(c *manager.Config) {
		c.EvictionRate, c.EvictionBurst, c.EvictionRatePerNamespace = rate, burst, perNS
		c.MaxConcurrentEvictions = slots
		c.EvictionRetry = timedqueue.RetryPolicy{MaxAttempts: 1000, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second}
		c.Logger, c.Recorder = ptr.To(logr.Discard()), nil
		if client.Cluster == nil {
			client.Cluster = c.Client.(*cluster.Cluster)
		}
		c.Client = client
	})
	client.e = e
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		e.addNode(n)
	}
	// Pods bound at t0, a second apart in toleration: deadlines differ.
	type podInfo struct {
		node      string
		secs      int64
		disturbed bool // moved, cancelled or misbehaving: out of the order check
	}
	pods := map[types.NamespacedName]*podInfo{}
	const n = 24
	for i := range n {
		key := types.NamespacedName{Namespace: []string{"a", "b"}[i%2], Name: fmt.Sprintf("p%02d", i)}
		info := &podInfo{node: nodes[rng.IntN(len(nodes))], secs: int64(rng.IntN(15))}
		if kind := rng.IntN(numCallKinds * 2); kind < numCallKinds && kind != callNormal {
			client.kind[key] = kind
			info.disturbed = true
		}
		pods[key] = info
		_, err := e.c.AddPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
			Spec:       v1.PodSpec{NodeName: info.node, Tolerations: tolerating(info.secs)},
		})
		require.NoError(t, err)
	}
	e.settle()
	tainted := e.clk.Now()
	for _, n := range nodes {
		taintSince(e, n, tainted)
	}
	untainted := map[string]bool{}
	// 40 s of random history.
	for e.clk.Since(tainted) < 40*time.Second {
		switch r := rng.IntN(20); {
		case r == 0: // a node's taint goes (cancelling), or comes back
			n := nodes[rng.IntN(len(nodes))]
			if untainted[n] {
				taintSince(e, n, e.clk.Now())
				delete(untainted, n)
			} else {
				e.untaint(n)
				untainted[n] = true
			}
			for _, p := range pods {
				if p.node == n {
					p.disturbed = true
				}
			}
		case r == 1: // a pod's deadline moves: a shorter or longer toleration
			for key, p := range pods {
				pod, err := e.c.GetPod(key.Namespace, key.Name)
				if err != nil {
					continue
				}
				pod = pod.DeepCopy()
				p.secs = int64(rng.IntN(15))
				pod.Spec.Tolerations = tolerating(p.secs)
				_, err = e.c.UpdatePod(pod)
				require.NoError(t, err)
				p.disturbed = true
				e.settle()
				break
			}
		case r == 2: // a restart: Shutdown mid-wait, a fresh manager
			e.stopManager() // returns: Run and Shutdown do not hang
			client.mu.Lock()
			client.incarnation++
			client.mu.Unlock()
			e.start()
		}
		e.step(time.Duration(50+rng.IntN(400)) * time.Millisecond)
	}
	// Every node tainted again, calm: every pod must go.
	for n := range untainted {
		taintSince(e, n, e.clk.Now())
	}
	client.mu.Lock()
	client.calm = true
	client.mu.Unlock()
	for i := 0; i < 4000 && e.c.NumPods() > 0; i++ {
		e.step(250 * time.Millisecond)
	}
	require.Zero(t, e.c.NumPods(), "every pod evicted (seed %d: rate %g burst %d slots %d perNS %v)", seed, rate, burst, slots, perNS)

	client.mu.Lock()
	starts := append([]evictionStart(nil), client.starts...)
	client.mu.Unlock()
	type group struct {
		incarnation int
		bucket      string
	}
	groups := map[group][]evictionStart{}
	for _, s := range starts {
		g := group{s.incarnation, ""}
		if perNS {
			g.bucket = s.key.Namespace
		}
		groups[g] = append(groups[g], s)
	}
	for g, ss := range groups {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].at.Before(ss[j].at) })
		times := make([]time.Time, len(ss))
		for i, s := range ss {
			times[i] = s.at
		}
		requireWithinBudget(t, times, rate, burst, tainted)
		if !ample {
			continue
		}
		// Deadline order among the undisturbed.
		var prev *evictionStart
		for i := range ss {
			s := &ss[i]
			if pods[s.key].disturbed {
				continue
			}
			if prev != nil && s.at.After(prev.at) {
				require.LessOrEqual(t, pods[prev.key].secs, pods[s.key].secs,
					"seed %d, incarnation %d bucket %q: %v (deadline +%ds) started at +%v, before %v (deadline +%ds) at +%v",
					seed, g.incarnation, g.bucket, prev.key, pods[prev.key].secs, prev.at.Sub(tainted), s.key, pods[s.key].secs, s.at.Sub(tainted))
			}
			prev = s
		}
	}
}
