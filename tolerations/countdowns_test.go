package tolerations_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/tolerations"
)

// unknownNode is a node named name with NoExecute taints of the given keys,
// none with a TimeAdded.
func unknownNode(name string, keys ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, k := range keys {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Effect: v1.TaintEffectNoExecute})
	}
	return n
}

// unboundPod is a pod with no PodScheduled condition on node, tolerating
// every taint for secs seconds (forever if secs < 0).
func unboundPod(name string, uid types.UID, node string, secs int64) *v1.Pod {
	tol := v1.Toleration{Operator: v1.TolerationOpExists}
	if secs >= 0 {
		tol.TolerationSeconds = &secs
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
		Spec:       v1.PodSpec{NodeName: node, Tolerations: []v1.Toleration{tol}},
	}
}

func boundPod(name string, uid types.UID, node string, secs int64, at time.Time) *v1.Pod {
	p := unboundPod(name, uid, node, secs)
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.Time{Time: at}}}
	return p
}

// What Countdowns remembers goes with the pod, the taint or the node, and
// what it forgot counts afresh.
func TestCountdownsForget(t *testing.T) {
	type step struct {
		after  time.Duration // clock step before this one
		do     func(c *tolerations.Countdowns) tolerations.Decision
		pods   int // Len after the step
		nodes  int
		action tolerations.Action // the decision's, or none
		at     time.Duration      // its At, from t0, unless Never
	}
	node := unknownNode("n1", "a")
	pod := unboundPod("p", "u1", "n1", 100)
	decide := func(n *v1.Node, p *v1.Pod) func(*tolerations.Countdowns) tolerations.Decision {
		return func(c *tolerations.Countdowns) tolerations.Decision { return c.Decide(n, p) }
	}
	recheck := func(n *v1.Node, p *v1.Pod) func(*tolerations.Countdowns) tolerations.Decision {
		return func(c *tolerations.Countdowns) tolerations.Decision { return c.Recheck(n, p) }
	}
	forgetPod := func(c *tolerations.Countdowns) tolerations.Decision {
		c.ForgetPod("default", "p")
		return tolerations.Decision{}
	}
	forgetNode := func(c *tolerations.Countdowns) tolerations.Decision {
		c.ForgetNode("n1")
		return tolerations.Decision{}
	}
	const none = tolerations.Action(-1) // no decision to check
	tests := []struct {
		name  string
		steps []step
	}{
		{"decided again: the same deadline", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 50 * time.Second, do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 50 * time.Second, do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictNow, at: 100 * time.Second},
		}},
		{"the taint goes and comes back: a new countdown; the pod's first sight stays", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(unknownNode("n1"), pod), pods: 1, nodes: 0, action: tolerations.Never},
			{after: 10 * time.Second, do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 120 * time.Second},
		}},
		{"one of two taints goes: the other keeps its first sight", []step{
			{do: decide(unknownNode("n1", "a", "b"), pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(unknownNode("n1", "b"), pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(unknownNode("n1", "a", "b"), pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
		}},
		{"ForgetNode: the taint counts afresh", []step{
			{do: decide(node, boundPod("p", "u1", "n1", 100, t0.Add(-time.Hour))), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: forgetNode, pods: 1, nodes: 0, action: none},
			// A taint forgotten is another taint: the deadline of the old one does not stand.
			{do: decide(node, boundPod("p", "u1", "n1", 100, t0.Add(-time.Hour))), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 110 * time.Second},
		}},
		{"ForgetPod: the pod counts afresh", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: forgetPod, pods: 0, nodes: 1, action: none},
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 110 * time.Second},
		}},
		{"a new UID under the name counts afresh, without ForgetPod", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(node, unboundPod("p", "u2", "n1", 100)), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 110 * time.Second},
			{after: 10 * time.Second, do: decide(node, unboundPod("p", "u2", "n1", 100)), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 110 * time.Second},
		}},
		{"the same UID on another node counts afresh", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			// n2's taint has a TimeAdded long ago: the pod's start counts.
			{after: 10 * time.Second, do: decide(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
				{Key: "a", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(-time.Hour)}},
			}}}, unboundPod("p", "u1", "n2", 100)), pods: 1, nodes: 2, action: tolerations.EvictAt, at: 110 * time.Second},
		}},
		{"tolerated forever: the deadline is forgotten; both starts stay", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(node, unboundPod("p", "u1", "n1", -1)), pods: 1, nodes: 1, action: tolerations.Never},
			// Neither the taint nor the pod left: the countdown runs from their starts.
			{after: 10 * time.Second, do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
		}},
		{"untolerated: due from the pod's first sight, however often decided", []step{
			{do: decide(node, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u1"}, Spec: v1.PodSpec{NodeName: "n1"}}), pods: 1, nodes: 1, action: tolerations.EvictNow},
			{after: 10 * time.Second, do: decide(node, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u1"}, Spec: v1.PodSpec{NodeName: "n1"}}), pods: 1, nodes: 1, action: tolerations.EvictNow},
		}},
		{"a later PodScheduled time does not postpone the deadline", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(node, boundPod("p", "u1", "n1", 100, t0.Add(5*time.Second))), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
		}},
		{"an earlier PodScheduled time brings it earlier", []step{
			{do: decide(unknownNode("n1", "a"), pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
				{Key: "a", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(-time.Hour)}},
			}}}, boundPod("p", "u1", "n1", 100, t0.Add(-5*time.Second))), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 95 * time.Second},
		}},
		{"no node: Never, and the pod is forgotten", []step{
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: decide(nil, pod), pods: 0, nodes: 1, action: tolerations.Never},
		}},
		{"recorded times: the taint's start and the pod's deadline", []step{
			{do: decide(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
				{Key: "a", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}},
			}}}, boundPod("p", "u1", "n1", 100, t0)), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			// Refreshed in place: the first TimeAdded stands while the taint stays.
			{after: 10 * time.Second, do: decide(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
				{Key: "a", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(10 * time.Second)}},
			}}}, boundPod("p", "u1", "n1", 100, t0)), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 100 * time.Second},
			{do: decide(nil, boundPod("p", "u1", "n1", 100, t0)), pods: 0, nodes: 1, action: tolerations.Never},
		}},
		{"Recheck records nothing and forgets nothing", []step{
			{do: recheck(node, pod), pods: 0, nodes: 0, action: tolerations.EvictAt, at: 100 * time.Second},
			{after: 10 * time.Second, do: recheck(node, pod), pods: 0, nodes: 0, action: tolerations.EvictAt, at: 110 * time.Second},
			{do: decide(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 110 * time.Second},
			{after: 10 * time.Second, do: recheck(unknownNode("n1"), unboundPod("p", "u1", "n1", -1)), pods: 1, nodes: 1, action: tolerations.Never},
			{do: recheck(node, pod), pods: 1, nodes: 1, action: tolerations.EvictAt, at: 110 * time.Second},
			{do: recheck(nil, pod), pods: 1, nodes: 1, action: tolerations.Never},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
			for i, s := range tc.steps {
				clk.Step(s.after)
				d := s.do(c)
				if s.action != none {
					assert.Equal(t, s.action, d.Action, "step %d: %v", i, d)
					if s.action != tolerations.Never {
						assert.Equal(t, t0.Add(s.at), d.At, "step %d: %v", i, d)
					}
				}
				pods, nodes := c.Len()
				assert.Equal(t, s.pods, pods, "step %d: pods remembered", i)
				assert.Equal(t, s.nodes, nodes, "step %d: nodes remembered", i)
			}
		})
	}
}

// Deciding again with nothing changed gives the same decision, later too:
// an untolerated pod's At is when it became due, not the time of the call.
func TestDecisionsAreStable(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: "timed", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(-time.Minute)}},
		{Key: "untimed", Effect: v1.TaintEffectNoExecute},
	}}}
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "untolerated", UID: "u1"}, Spec: v1.PodSpec{NodeName: "n1"}},
		boundPod("bound", "u2", "n1", 30, t0.Add(-time.Hour)),
		unboundPod("unbound", "u3", "n1", 30),
	}
	first := make([]tolerations.Decision, len(pods))
	for i, p := range pods {
		first[i] = c.Decide(node, p)
		require.NotEqual(t, tolerations.Never, first[i].Action, "%s", p.Name)
	}
	for range 5 {
		clk.Step(17 * time.Second)
		for i, p := range pods {
			d := c.Decide(node, p)
			d.Action = first[i].Action // EvictAt turns EvictNow as time passes
			assert.Equal(t, first[i], d, "%s decided again at %v", p.Name, clk.Now().Sub(t0))
			assert.Equal(t, first[i].At, c.Recheck(node, p).At, "%s rechecked", p.Name)
		}
	}
	// The untolerated pod became due when first seen on the tainted node.
	assert.Equal(t, t0, first[0].At)
	assert.True(t, first[0].Untolerated)
}

// A taint is forgotten when its node no longer has it, with no pod to
// decide for; ObserveNode reports the changes its pods must be observed for.
func TestObserveNode(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	assert.True(t, c.ObserveNode(unknownNode("n1", "a")), "a new taint")
	assert.False(t, c.ObserveNode(unknownNode("n1", "a")), "the same taint")
	_, nodes := c.Len()
	assert.Equal(t, 1, nodes)

	clk.Step(10 * time.Second)
	refreshed := unknownNode("n1", "a")
	refreshed.Spec.Taints[0].TimeAdded = &metav1.Time{Time: clk.Now()}
	assert.False(t, c.ObserveNode(refreshed), "refreshed in place: the first sight stands")
	assert.Equal(t, t0.Add(100*time.Second), c.Decide(refreshed, unboundPod("p", "u1", "n1", 100)).At.Add(-10*time.Second),
		"counted from the pod's first sight, 10 s after the taint's")
	assert.True(t, c.ObserveNode(unknownNode("n1")), "the taint gone")
	_, nodes = c.Len()
	assert.Zero(t, nodes)
	assert.False(t, c.ObserveNode(unknownNode("n1")), "nothing to forget")
	assert.False(t, c.ObserveNode(nil))

	// Observing allocates only when the taints change.
	node := unknownNode("n2", "a", "b")
	c.ObserveNode(node)
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.ObserveNode(node) }))
	pod := unboundPod("q", "u2", "n2", 100)
	c.ObservePod(pod)
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.ObservePod(pod) }))
	untainted := boundPod("r", "u3", "n3", 100, t0)
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.ObservePod(untainted) }))
}

// A pod deleted and created again under its name keeps the new pod's
// memory when the old pod's delete event comes late; a pod with no node is
// forgotten.
func TestObservePodDeleted(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	node := unknownNode("n1", "a")
	c.ObserveNode(node)
	old := unboundPod("p", "u1", "n1", 100)
	c.ObservePod(old)
	clk.Step(10 * time.Second)
	recreated := unboundPod("p", "u2", "n1", 100)
	c.ObservePod(recreated)
	clk.Step(10 * time.Second)
	c.ObservePodDeleted(old)
	assert.Equal(t, t0.Add(110*time.Second), c.Recheck(node, recreated).At, "the new pod's first sight was forgotten")
	c.ObservePodDeleted(recreated)
	pods, _ := c.Len()
	assert.Zero(t, pods)

	c.ObservePod(recreated)
	unbound := recreated.DeepCopy()
	unbound.Spec.NodeName = ""
	c.ObservePod(unbound)
	pods, _ = c.Len()
	assert.Zero(t, pods)
	c.ObservePod(nil)
	c.ObservePodDeleted(nil)
}

// A nil clock is the real one; a nil pod decides Never; the times decided
// are in the clock's location.
func TestCountdownsEdges(t *testing.T) {
	c := tolerations.NewCountdowns(nil, tolerations.Matcher{})
	before := time.Now()
	d := c.Decide(unknownNode("n1", "a"), unboundPod("p", "u1", "n1", 100))
	require.Equal(t, tolerations.EvictAt, d.Action)
	assert.WithinRange(t, d.At, before.Add(100*time.Second), time.Now().Add(100*time.Second))
	assert.Equal(t, tolerations.Decision{}, c.Decide(unknownNode("n1", "a"), nil))
	assert.Equal(t, tolerations.Decision{}, c.Recheck(nil, nil))

	loc := time.FixedZone("UTC+2", 2*60*60)
	clk := testingclock.NewFakeClock(t0.In(loc))
	c = tolerations.NewCountdowns(clk, tolerations.Matcher{})
	c.Decide(unknownNode("n1", "a"), unboundPod("p", "u1", "n1", 100))
	clk.Step(time.Second)
	d = c.Decide(unknownNode("n1", "a"), unboundPod("p", "u1", "n1", 100))
	assert.Equal(t, "EvictAt 2025-01-01T02:01:40+02:00 (taint a:NoExecute)", d.String())

	// A zero now decides Never and keeps what is remembered.
	clk.SetTime(time.Time{})
	assert.Equal(t, tolerations.Decision{}, c.Decide(unknownNode("n1"), unboundPod("p", "u1", "n1", 100)))
	pods, nodes := c.Len()
	assert.Equal(t, 1, pods)
	assert.Equal(t, 1, nodes)

	// The Matcher given is the one used.
	clk.SetTime(t0)
	gt := v1.Toleration{Key: "cpu", Operator: v1.TolerationOpGt, Value: "4", TolerationSeconds: new(int64(100))}
	gpu := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "cpu", Value: "8", Effect: v1.TaintEffectNoExecute}}}}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "u2"}, Spec: v1.PodSpec{NodeName: "n2", Tolerations: []v1.Toleration{gt}}}
	assert.Equal(t, tolerations.EvictAt, tolerations.NewCountdowns(clk, tolerations.Matcher{ComparisonOperators: true}).Decide(gpu, p).Action)
	assert.Equal(t, tolerations.EvictNow, tolerations.NewCountdowns(clk, tolerations.Matcher{}).Decide(gpu, p).Action)
}

// Once everything is remembered, deciding again allocates nothing.
func TestCountdownsDecideDoesNotAllocate(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	node := unknownNode("n1", "a", "b")
	node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: "c", Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}})
	pods := []*v1.Pod{unboundPod("p", "u1", "n1", 100), boundPod("q", "u2", "n1", 100, t0)}
	for _, p := range pods {
		c.Decide(node, p)
	}
	for _, p := range pods {
		assert.Zero(t, testing.AllocsPerRun(100, func() { c.Decide(node, p) }), "Decide %s", p.Name)
		assert.Zero(t, testing.AllocsPerRun(100, func() { c.Recheck(node, p) }), "Recheck %s", p.Name)
	}
}

// Many goroutines deciding, rechecking and forgetting overlapping pods and
// nodes at once (run with -race): the pods nobody forgets keep their
// deadline, and what is remembered at the end is exactly what is left.
func TestCountdownsConcurrent(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	const workers, perWorker, nodes = 8, 50, 4
	nodeOf := func(i int) string { return fmt.Sprintf("n%d", i%nodes) }
	stable := unknownNode("stable", "a")
	run := func(f func(w int)) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { f(w) })
		}
		wg.Wait()
	}
	podOf := func(w, i int, node string) *v1.Pod {
		return unboundPod(fmt.Sprintf("p-%d-%d", w, i), types.UID(fmt.Sprintf("u-%d-%d", w, i)), node, 100)
	}
	churnOf := func(i int, node string) *v1.Pod { // the same names in every worker
		return unboundPod(fmt.Sprintf("churn-%d", i), types.UID(fmt.Sprintf("churn-%d", i)), node, 100)
	}

	// Every worker decides its own pods on the stable node, and churns
	// shared pods and nodes that others churn too.
	run(func(w int) {
		for i := range perWorker {
			d := c.Decide(stable, podOf(w, i, "stable"))
			assert.Equal(t, t0.Add(100*time.Second), d.At)
			churn := churnOf(i, nodeOf(i+w))
			c.Decide(unknownNode(nodeOf(i+w), "a", fmt.Sprint(w%2)), churn)
			c.Recheck(unknownNode(nodeOf(i), "a"), churn)
			if i%3 == w%3 {
				c.ForgetPod(churn.Namespace, churn.Name)
				c.ForgetNode(nodeOf(i + w))
			}
		}
	})
	clk.Step(50 * time.Second)
	run(func(w int) {
		for i := range perWorker {
			p := podOf(w, i, "stable")
			for _, d := range []tolerations.Decision{c.Decide(stable, p), c.Recheck(stable, p)} {
				if !assert.Equal(t, t0.Add(100*time.Second), d.At, "%s", p.Name) {
					return
				}
			}
			churn := churnOf(i, nodeOf(i+w))
			c.ForgetPod(churn.Namespace, churn.Name)
			c.ForgetNode(nodeOf(i + w))
		}
	})
	pods, nodeCount := c.Len()
	assert.Equal(t, workers*perWorker, pods, "pods remembered: those on the stable node")
	assert.Equal(t, 1, nodeCount, "nodes remembered: the stable one")
	run(func(w int) {
		for i := range perWorker {
			p := podOf(w, i, "stable")
			c.ForgetPod(p.Namespace, p.Name)
		}
	})
	c.ForgetNode("stable")
	pods, nodeCount = c.Len()
	assert.Zero(t, pods)
	assert.Zero(t, nodeCount)
}

// Go maps never shrink: after a peak of pods and nodes (a zone failing) has
// gone, the memory of the peak must go too.
func TestCountdownsGiveMemoryBack(t *testing.T) {
	const n, nodeCount = 200_000, 4096
	clk := testingclock.NewFakeClock(t0)
	c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
	nodes := make([]*v1.Node, nodeCount)
	for i := range nodes {
		nodes[i] = unknownNode(fmt.Sprintf("node-%d", i), "a")
	}
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = unboundPod(fmt.Sprintf("pod-%d", i), types.UID(fmt.Sprintf("uid-%d", i)), nodes[i%nodeCount].Name, 100)
	}
	base := heapAfterGC()
	for i, p := range pods {
		c.Decide(nodes[i%nodeCount], p)
	}
	full := heapAfterGC()
	remembered, nodesRemembered := c.Len()
	require.Equal(t, n, remembered)
	require.Equal(t, nodeCount, nodesRemembered)
	for _, p := range pods[1:] {
		c.ForgetPod(p.Namespace, p.Name)
	}
	for _, node := range nodes[1:] {
		c.ForgetNode(node.Name)
	}
	remembered, nodesRemembered = c.Len()
	require.Equal(t, 1, remembered)
	require.Equal(t, 1, nodesRemembered)
	clk.Step(10 * time.Second)
	assert.Equal(t, t0.Add(100*time.Second), c.Decide(nodes[0], pods[0]).At, "the pod left was lost in a rebuild")
	left := heapAfterGC()
	t.Logf("heap: %d KiB full (%d B a pod), %d KiB after forgetting all but one",
		(full-base)>>10, (full-base)/n, int64(left-base)>>10)
	// pods and nodes hold the objects; what is left beyond them is the maps.
	assert.Less(t, int64(left)-int64(base), int64(full-base)/10, "the maps kept the memory of their peak")
	runtime.KeepAlive(pods)
	runtime.KeepAlive(nodes)
	runtime.KeepAlive(c)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
