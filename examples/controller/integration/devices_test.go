package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// Device taints (--device-taints) against the real API server: a pod whose
// allocated device has a NoExecute taint it does not tolerate goes, at once
// or when its toleration runs out, through the same manager, events and
// bounds as for node taints. Bounds: the controller's DELETE no earlier
// than the deadline computed from the stored values (whole seconds), the
// pod gone by the deadline + 2 s.

// An untolerated taint in a device's ResourceSlice evicts at once, with the
// device taint manager's DisruptionTarget reason and event, naming the
// device.
func TestDeviceTaintUntoleratedEvicts(t *testing.T) {
	h := setupDevices(t, "it-dev-evict")
	node := h.node("node")
	pool := h.ns
	h.slice(pool, node, "gpu-0")
	pod := h.devicePod("web", node, pool, "gpu-0", nil)
	w := h.watchPod(pod)
	ctrl := h.startController(true, nil, h.withDeviceTaints(100))

	slice, err := testenv.TaintDevice(h.ctx, h.c, pool, "gpu-0", brokenTaint())
	require.NoError(t, err)
	added := slice.Spec.Devices[0].Taints[0].TimeAdded
	t.Logf("untolerated: gone %s after the taint's TimeAdded", ms(h.assertGoneAt(ctrl, w, deviceDeadline(t, pod, added, 0))))

	dt := w.disruptionTarget()
	require.NotNil(t, dt, "the pod never carried a DisruptionTarget condition")
	assert.Equal(t, manager.ReasonDeletionByDeviceTaintManager, dt.Reason)
	assert.Contains(t, dt.Message, "device taint example.com/broken=true:NoExecute on gpu.example.com/"+pool+"/gpu-0")
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	ev, err := h.waitForEventReason(ctx, pod, manager.EventReasonDeviceTaintManagerEviction, "Marking for deletion")
	require.NoError(t, err, "no Marking for deletion event")
	assert.Equal(t, "Marking for deletion Pod "+h.ns+"/web: device taint example.com/broken=true:NoExecute on gpu.example.com/"+pool+"/gpu-0", ev.Message)
	assert.Equal(t, 1.0, ctrl.evictions(t, "deleted"))
	ctrl.stop(t)
	assert.Equal(t, "device gpu.example.com/"+pool+"/gpu-0 example.com/broken:NoExecute (its slice)", evictionOf(t, h.verify(), "web").Taint,
		"the oracle's taint that made the pod due")
}

// A DeviceTaintRule's taint tolerated for 8 s: a pod goes at TimeAdded + 8
// s; so does one whose toleration has an empty effect (it tolerates
// NoExecute, as the scheduler allocates: upstream's controller would evict
// it at once); a pod that arrives 3 s after the taint gets its full 8 s from
// its binding.
func TestDeviceTaintCountdowns(t *testing.T) {
	const toleration = 8 * time.Second
	h := setupDevices(t, "it-dev-countdown")
	node := h.node("node")
	pool := h.ns
	h.slice(pool, node, "gpu-0", "gpu-1", "gpu-2")
	tol := h.devicePod("tol8", node, pool, "gpu-0", tolerateBroken(toleration, resourcev1.DeviceTaintEffectNoExecute))
	empty := h.devicePod("empty-effect", node, pool, "gpu-1", tolerateBroken(toleration, ""))
	ctrl := h.startController(true, nil, h.withDeviceTaints(100))
	wTol, wEmpty := h.watchPod(tol), h.watchPod(empty)

	rule := h.rule("broken", poolSelector(pool), brokenTaint())
	added := rule.Spec.Taint.TimeAdded
	time.Sleep(3 * time.Second) // the late pod arrives 3 s after the taint
	late := h.devicePod("late", node, pool, "gpu-2", tolerateBroken(toleration, resourcev1.DeviceTaintEffectNoExecute))
	wLate := h.watchPod(late)

	lateDeadline := deviceDeadline(t, late, added, toleration)
	require.True(t, lateDeadline.After(added.Add(toleration)), "the late pod was bound after the taint")
	t.Logf("countdowns: tol8 gone %s after TimeAdded + 8 s", ms(h.assertGoneAt(ctrl, wTol, deviceDeadline(t, tol, added, toleration))))
	t.Logf("countdowns: empty-effect gone %s after TimeAdded + 8 s", ms(h.assertGoneAt(ctrl, wEmpty, deviceDeadline(t, empty, added, toleration))))
	t.Logf("countdowns: late gone %s after its binding + 8 s (%s after TimeAdded + 8 s)",
		ms(h.assertGoneAt(ctrl, wLate, lateDeadline)), ms(lateDeadline.Sub(added.Add(toleration))))
}

// A rule deleted before its countdown ends cancels the eviction, with a
// "Cancelling deletion" event of the device taint manager.
func TestDeviceTaintRemovedCancels(t *testing.T) {
	const toleration = 5 * time.Second
	h := setupDevices(t, "it-dev-cancel")
	node := h.node("node")
	pool := h.ns
	h.slice(pool, node, "gpu-0")
	pod := h.devicePod("web", node, pool, "gpu-0", tolerateBroken(toleration, resourcev1.DeviceTaintEffectNoExecute))
	w := h.watchPod(pod)
	h.startController(true, nil, h.withDeviceTaints(100))
	rule := h.rule("broken", poolSelector(pool), brokenTaint())
	_, err := h.waitForEventReason(h.ctx, pod, manager.EventReasonDeviceTaintManagerEviction, "Scheduled for deletion at ")
	require.NoError(t, err, "no countdown event")
	require.NoError(t, h.c.ResourceV1().DeviceTaintRules().Delete(h.ctx, rule.Name, metav1.DeleteOptions{}))
	_, err = h.waitForEventReason(h.ctx, pod, manager.EventReasonDeviceTaintManagerEviction, "Cancelling deletion of Pod "+h.ns+"/web")
	require.NoError(t, err, "no Cancelling deletion event")
	w.stays(t, deviceDeadline(t, pod, rule.Spec.Taint.TimeAdded, toleration).Add(2*time.Second))
}

// A rule that selects one pool evicts only the pods of that pool's
// devices; its status says so as upstream's does (PodsPendingEviction or
// NotStarted first, Completed with the count once the pod is gone and the
// 10 s between writes have passed). A rule with effect None previews what
// NoExecute would do.
func TestDeviceTaintRuleSelectsOnePool(t *testing.T) {
	h := setupDevices(t, "it-dev-pool")
	nodeA, nodeB := h.node("a"), h.node("b")
	poolA, poolB := h.ns+"-a", h.ns+"-b"
	h.slice(poolA, nodeA, "gpu-0")
	h.slice(poolB, nodeB, "gpu-0", "gpu-1")
	a := h.devicePod("a", nodeA, poolA, "gpu-0", nil)
	b := h.devicePod("b", nodeB, poolB, "gpu-0", nil)
	wA, wB := h.watchPod(a), h.watchPod(b)
	ctrl := h.startController(true, nil, h.withDeviceTaints(100))

	rule := h.rule("pool-a", poolSelector(poolA), brokenTaint())
	preview := h.rule("preview-b", poolSelector(poolB), resourcev1.DeviceTaint{Key: brokenKey, Effect: resourcev1.DeviceTaintEffectNone})
	h.assertGoneAt(ctrl, wA, deviceDeadline(t, a, rule.Spec.Taint.TimeAdded, 0))
	wB.stays(t, time.Now().Add(2*time.Second))

	cond, err := h.waitForRuleCondition(h.ctx, preview.Name, func(c metav1.Condition) bool { return c.Reason == "NoEffect" })
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, "2 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace if the effect was NoExecute.", cond.Message)
	assert.Equal(t, preview.Generation, cond.ObservedGeneration)
	cond, err = h.waitForRuleCondition(h.ctx, rule.Name, func(c metav1.Condition) bool { return c.Reason == "Completed" })
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, "1 pod evicted since starting the controller.", cond.Message)
	ctrl.stop(t)
	rep := h.verify()
	assert.Len(t, rep.Evictions, 1, "the oracle saw pool B's pod removed")
	assert.Equal(t, ruleTaint(poolA, "gpu-0", rule), evictionOf(t, rep, "a").Taint)
}

// With --use-eviction-api, a PodDisruptionBudget allowing one disruption
// over three pods on tainted devices: one eviction at a time, the others
// refused by the budget (a real 429) and retried until it allows another.
func TestDeviceTaintEvictionAPIOneAtATime(t *testing.T) {
	h := setupDevices(t, "it-dev-pdb")
	node := h.node("node")
	pool := h.ns
	h.slice(pool, node, "gpu-0", "gpu-1", "gpu-2")
	watches := map[string]*podWatch{}
	for i, name := range []string{"web-0", "web-1", "web-2"} {
		h.devicePod(name, node, pool, []string{"gpu-0", "gpu-1", "gpu-2"}[i], nil, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} })
		pod, err := testenv.MarkPodReady(h.ctx, h.c, h.ns, name) // as the Eviction API wants for budgets
		require.NoError(t, err)
		watches[name] = h.watchPod(pod)
	}
	h.webPDB(2)
	h.pdbStatus("web", 3, 3, 2, 1, func(string) bool { return true })
	ctrl := h.startController(true, nil, h.withDeviceTaints(100), func(o *app.Options) { o.UseEvictionAPI = true })
	start := time.Now()
	h.rule("broken", poolSelector(pool), brokenTaint())

	gone := map[string]bool{}
	for round := 1; round <= 3; round++ {
		require.NoError(t, ctrl.calls.waitEvictions(h.ctx, func(evicted, refused map[string][]time.Time) bool {
			return len(evicted) == round && (round == 3 || len(refused) >= 3-round)
		}), "round %d: waiting for an eviction and the others' refusals", round)
		evicted, refused, _, _ := ctrl.calls.evictionCalls()
		var this string
		for name := range evicted {
			if !gone[name] {
				require.Empty(t, this, "round %d: two evictions accepted with one disruption allowed: %v", round, evicted)
				this = name
			}
		}
		t.Logf("PDB round %d: %s evicted; refusals so far %s", round, this, refusalTimes(refused, start))
		watches[this].waitDeleted(t, 15*time.Second)
		assert.Equal(t, "EvictionByEvictionAPI", watches[this].disruptionTarget().Reason)
		gone[this] = true
		// The disruption controller would count the pod gone and allow one
		// disruption again.
		h.pdbStatus("web", 3, int32(3-round), 2, 1, func(pod string) bool { return !gone[pod] })
	}
	assert.Equal(t, 3.0, ctrl.evictions(t, "evicted"))
	assert.Equal(t, 0.0, ctrl.evictions(t, "deleted"))
}

// The guard: a rule with an empty selector whose taint would evict 3 pods,
// over --device-taint-rule-max-pods=2, evicts nothing; its status says
// TooManyPods with the count, and a Warning event in namespace default.
// Narrowed to one pool (2 pods), it is released: those 2 go, the third
// stays.
func TestDeviceTaintRuleGuard(t *testing.T) {
	h := setupDevices(t, "it-dev-guard")
	nodeA, nodeB := h.node("a"), h.node("b")
	poolA, poolB := h.ns+"-a", h.ns+"-b"
	h.slice(poolA, nodeA, "gpu-0", "gpu-1")
	h.slice(poolB, nodeB, "gpu-0")
	a0 := h.devicePod("a0", nodeA, poolA, "gpu-0", nil)
	a1 := h.devicePod("a1", nodeA, poolA, "gpu-1", nil)
	b0 := h.devicePod("b0", nodeB, poolB, "gpu-0", nil)
	wA0, wA1, wB0 := h.watchPod(a0), h.watchPod(a1), h.watchPod(b0)
	ctrl := h.startController(true, nil, h.withDeviceTaints(2))

	rule := h.rule("everything", resourcev1.DeviceTaintSelector{}, brokenTaint())
	// The first status written says so.
	cond, err := h.waitForRuleCondition(h.ctx, rule.Name, func(metav1.Condition) bool { return true })
	require.NoError(t, err)
	require.Equal(t, "TooManyPods", cond.Reason, "the rule's first status: %s", cond.Message)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, "3 pods would be evicted in 1 namespace, more than the limit of 2 (--device-taint-rule-max-pods): no eviction started. Narrow the rule's selector or raise the limit.", cond.Message)
	assert.Equal(t, rule.Generation, cond.ObservedGeneration)
	ev, err := h.waitForRuleEvent(h.ctx, rule.Name, "TooManyPods")
	require.NoError(t, err, "no Warning event about the held rule")
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, metav1.NamespaceDefault, ev.Namespace)
	assert.Contains(t, ev.Message, "3 pods would be evicted")
	window := time.Now().Add(3 * time.Second)
	for _, w := range []*podWatch{wA0, wA1, wB0} {
		w.stays(t, window)
	}
	assert.Empty(t, ctrl.debugEvictions(t), "a held rule schedules nothing")

	// Narrowed to pool A: 2 pods, within the limit.
	narrowed, err := testenv.UpdateDeviceTaintRule(h.ctx, h.c, rule.Name, func(s *resourcev1.DeviceTaintRuleSpec) {
		sel := poolSelector(poolA)
		s.DeviceSelector = &sel
	})
	require.NoError(t, err)
	released := time.Now()
	for _, w := range []*podWatch{wA0, wA1} {
		gone := w.waitDeleted(t, 15*time.Second)
		t.Logf("guard: %s gone %s after the rule was narrowed", w.pod.Name, ms(gone.Sub(released)))
		assert.LessOrEqual(t, gone.Sub(released), 2*time.Second)
	}
	wB0.stays(t, time.Now().Add(2*time.Second))
	cond, err = h.waitForRuleCondition(h.ctx, rule.Name, func(c metav1.Condition) bool {
		return c.ObservedGeneration == narrowed.Generation && c.Reason != "TooManyPods"
	})
	require.NoError(t, err)
	t.Logf("guard: status after narrowing: %s: %s", cond.Reason, cond.Message)

	// The oracle, counting from the objects alone, held the rule from its
	// creation until it was narrowed, and judged both evictions by its
	// taint.
	ctrl.stop(t)
	rep := h.verify()
	assertHeldOnce(t, rep, rule, 3, 2)
	for _, name := range []string{"a0", "a1"} {
		assert.Equal(t, ruleTaint(poolA, strings.Replace(name, "a", "gpu-", 1), rule), evictionOf(t, rep, name).Taint)
	}
	assert.Len(t, rep.Evictions, 2)
}

// A node taint and a device taint on one pod: the earlier deadline wins,
// and the taint that leaves cancels nothing while the other runs. On node
// 1 the device's countdown (5 s) ends before the node's (10 s), and the
// node's taint leaves; on node 2 the node's (5 s) ends first, and the
// device's rule leaves. Both pods go at their 5 s deadline.
func TestNodeAndDeviceTaintEarlierWins(t *testing.T) {
	const short, long = 5 * time.Second, 10 * time.Second
	const nodeKey = "example.com/maintenance"
	h := setupDevices(t, "it-dev-both")
	node1, node2 := h.node("one"), h.node("two")
	pool1, pool2 := h.ns+"-one", h.ns+"-two"
	h.slice(pool1, node1, "gpu-0")
	h.slice(pool2, node2, "gpu-0")
	nodeTol := func(d time.Duration) []corev1.Toleration {
		return []corev1.Toleration{{Key: nodeKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(d)}}
	}
	devFirst := h.devicePod("device-first", node1, pool1, "gpu-0", tolerateBroken(short, resourcev1.DeviceTaintEffectNoExecute), func(p *corev1.Pod) { p.Spec.Tolerations = nodeTol(long) })
	nodeFirst := h.devicePod("node-first", node2, pool2, "gpu-0", tolerateBroken(long, resourcev1.DeviceTaintEffectNoExecute), func(p *corev1.Pod) { p.Spec.Tolerations = nodeTol(short) })
	wDev, wNode := h.watchPod(devFirst), h.watchPod(nodeFirst)
	ctrl := h.startController(true, nil, h.withDeviceTaints(100))

	rule1 := h.rule("one", poolSelector(pool1), brokenTaint())
	rule2 := h.rule("two", poolSelector(pool2), brokenTaint())
	_, err := testenv.TaintNode(h.ctx, h.c, node1, testenv.NoExecuteTaint(nodeKey, "true"))
	require.NoError(t, err)
	tainted2, err := testenv.TaintNode(h.ctx, h.c, node2, testenv.NoExecuteTaint(nodeKey, "true"))
	require.NoError(t, err)
	devDeadline := deviceDeadline(t, devFirst, rule1.Spec.Taint.TimeAdded, short)
	nodeDeadline := countdownStart(t, tainted2, nodeKey, nodeFirst).Add(short)

	// Both countdowns visible, each with the earlier deadline and its taint.
	require.Eventually(t, func() bool { return len(ctrl.debugEvictions(t)) == 2 }, 5*time.Second, 100*time.Millisecond)
	for _, e := range ctrl.debugEvictions(t) {
		switch e.Name {
		case "device-first":
			assert.Equal(t, "gpu.example.com/"+pool1+"/gpu-0", e.Device)
			assert.Equal(t, rule1.Name, e.Rule)
			assert.Equal(t, "example.com/broken=true:NoExecute", e.Taint)
			assert.Equal(t, devDeadline.UTC().Format(time.RFC3339Nano), e.Deadline)
		case "node-first":
			assert.Empty(t, e.Device)
			assert.Equal(t, nodeKey+"=true:NoExecute", e.Taint)
			assert.Equal(t, nodeDeadline.UTC().Format(time.RFC3339Nano), e.Deadline)
		}
	}

	_, err = testenv.UntaintNode(h.ctx, h.c, node1, nodeKey, corev1.TaintEffectNoExecute)
	require.NoError(t, err)
	require.NoError(t, h.c.ResourceV1().DeviceTaintRules().Delete(h.ctx, rule2.Name, metav1.DeleteOptions{}))
	t.Logf("both: device-first gone %s after its device deadline", ms(h.assertGoneAt(ctrl, wDev, devDeadline)))
	t.Logf("both: node-first gone %s after its node deadline", ms(h.assertGoneAt(ctrl, wNode, nodeDeadline)))
	assert.Empty(t, h.events("device-first", "Cancelling deletion"))
	// The oracle, from its own model, agrees on the taint that won each.
	ctrl.stop(t)
	rep := h.verify()
	assert.Equal(t, ruleTaint(pool1, "gpu-0", rule1), evictionOf(t, rep, "device-first").Taint)
	assert.Equal(t, nodeKey+":NoExecute", evictionOf(t, rep, "node-first").Taint)
}

// The leader stops mid-countdown; the standby, whose caches were warm, takes
// the Lease over and evicts at the original deadline (TimeAdded + 8 s).
func TestDeviceTaintLeaderChange(t *testing.T) {
	const toleration = 8 * time.Second
	h := setupDevices(t, "it-dev-leader")
	node := h.node("node")
	pool := h.ns
	h.slice(pool, node, "gpu-0")
	pod := h.devicePod("web", node, pool, "gpu-0", tolerateBroken(toleration, resourcev1.DeviceTaintEffectNoExecute))
	w := h.watchPod(pod)
	first := h.startController(true, nil, h.withDeviceTaints(100))
	second := h.startController(false, nil, h.withDeviceTaints(100), func(o *app.Options) { o.LeaderElect = true })
	rule := h.rule("broken", poolSelector(pool), brokenTaint())
	deadline := deviceDeadline(t, pod, rule.Spec.Taint.TimeAdded, toleration)
	_, err := h.waitForEventReason(h.ctx, pod, manager.EventReasonDeviceTaintManagerEviction, "Scheduled for deletion at ")
	require.NoError(t, err, "no countdown event from the first leader")
	time.Sleep(time.Until(deadline.Add(-5 * time.Second)))
	stopped := time.Now()
	first.stop(t)
	require.NoError(t, waitForLeader(h.ctx, h.c, second.identity))
	t.Logf("leader change: the first leader stopped %s before the deadline; the second took over %s later",
		ms(deadline.Sub(stopped)), ms(time.Since(stopped)))
	t.Logf("leader change: gone %s after TimeAdded + 8 s", ms(h.assertGoneAt(second, w, deadline)))
	_, ok := first.deleteCalled(pod.UID)
	assert.False(t, ok, "the stopped leader deleted the pod")
}

// The guard counts whenever the set changes: a rule within the limit (2
// pods tolerating it 30 s, --device-taint-rule-max-pods=2) that a third
// claim on its devices takes past it stops: the countdowns running are
// cancelled and its status says TooManyPods. The claim's removal releases
// it, and the countdowns resume with their original deadlines.
func TestDeviceTaintRuleGuardGrowth(t *testing.T) {
	const toleration = 30 * time.Second
	h := setupDevices(t, "it-dev-growth")
	node := h.node("node")
	pool := h.ns
	h.slice(pool, node, "gpu-0", "gpu-1", "gpu-2")
	tol := tolerateBroken(toleration, resourcev1.DeviceTaintEffectNoExecute)
	p0 := h.devicePod("p0", node, pool, "gpu-0", tol)
	p1 := h.devicePod("p1", node, pool, "gpu-1", tol)
	ctrl := h.startController(true, nil, h.withDeviceTaints(2))
	rule := h.rule("pool", poolSelector(pool), brokenTaint())
	for _, p := range []*corev1.Pod{p0, p1} {
		_, err := h.waitForEventReason(h.ctx, p, manager.EventReasonDeviceTaintManagerEviction, "Scheduled for deletion at ")
		require.NoError(t, err, "no countdown for %s", p.Name)
	}
	require.Len(t, ctrl.debugEvictions(t), 2)

	p2 := h.devicePod("p2", node, pool, "gpu-2", tol)
	for _, p := range []*corev1.Pod{p0, p1} {
		_, err := h.waitForEventReason(h.ctx, p, manager.EventReasonDeviceTaintManagerEviction, "Cancelling deletion of Pod ")
		require.NoError(t, err, "the countdown of %s not cancelled", p.Name)
	}
	assert.Empty(t, ctrl.debugEvictions(t), "a held rule schedules nothing")
	cond, err := h.waitForRuleCondition(h.ctx, rule.Name, func(c metav1.Condition) bool { return c.Reason == "TooManyPods" })
	require.NoError(t, err)
	assert.Contains(t, cond.Message, "3 pods would be evicted in 1 namespace")

	// p2 leaves: back within the limit, the countdowns resume where they were.
	require.NoError(t, h.c.CoreV1().Pods(h.ns).Delete(h.ctx, p2.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	require.Eventually(t, func() bool { return len(ctrl.debugEvictions(t)) == 2 }, 5*time.Second, 50*time.Millisecond)
	for _, e := range ctrl.debugEvictions(t) {
		pod := map[string]*corev1.Pod{"p0": p0, "p1": p1}[e.Name]
		require.NotNil(t, pod, "/debug/evictions lists %s", e.Name)
		assert.Equal(t, deviceDeadline(t, pod, rule.Spec.Taint.TimeAdded, toleration).UTC().Format(time.RFC3339Nano), e.Deadline)
		assert.Equal(t, rule.Name, e.Rule)
	}
	// The oracle held it from p2's claim to p2's deletion too.
	ctrl.stop(t)
	assertHeldOnce(t, h.verify(), rule, 3, 2)
}
