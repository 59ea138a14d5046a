package integration_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/tolerations"
)

// readyPod creates a pod labelled app=web, binds it to node and reports it
// Running and Ready, as the scheduler and the kubelet would: the Eviction
// API checks PodDisruptionBudgets only for running pods, and counts only
// ready ones as healthy.
func (h *harness) readyPod(name, node string, tolerations ...corev1.Toleration) *corev1.Pod {
	h.t.Helper()
	pod := testenv.NewPod(h.ns, name, tolerations...)
	pod.Labels = map[string]string{"app": "web"}
	_, err := testenv.CreateBoundPod(h.ctx, h.c, pod, node)
	require.NoError(h.t, err)
	ready, err := testenv.MarkPodReady(h.ctx, h.c, h.ns, name)
	require.NoError(h.t, err)
	require.Equal(h.t, corev1.PodRunning, ready.Status.Phase)
	return ready
}

// webPDB creates the PodDisruptionBudget "web" over the pods labelled
// app=web, with minAvailable.
func (h *harness) webPDB(minAvailable int32) {
	h.t.Helper()
	_, err := h.c.PolicyV1().PodDisruptionBudgets(h.ns).Create(h.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(h.t, err)
}

// pdbStatus writes the budget's status as the disruption controller of
// kube-controller-manager would (there is none here): observed at the
// current generation, with healthy pods counted and disruptedPods kept
// only for pods that still exist.
func (h *harness) pdbStatus(name string, expected, healthy, desired, allowed int32, exists func(pod string) bool) *policyv1.PodDisruptionBudget {
	h.t.Helper()
	pdbs := h.c.PolicyV1().PodDisruptionBudgets(h.ns)
	var updated *policyv1.PodDisruptionBudget
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pdb, err := pdbs.Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pdb.Status.ObservedGeneration = pdb.Generation
		pdb.Status.ExpectedPods = expected
		pdb.Status.CurrentHealthy = healthy
		pdb.Status.DesiredHealthy = desired
		pdb.Status.DisruptionsAllowed = allowed
		maps.DeleteFunc(pdb.Status.DisruptedPods, func(pod string, _ metav1.Time) bool { return !exists(pod) })
		status := metav1.ConditionFalse
		reason := policyv1.InsufficientPodsReason
		if allowed > 0 {
			status, reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
		}
		cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: status, Reason: reason,
			ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.Now()}
		pdb.Status.Conditions = []metav1.Condition{cond}
		updated, err = pdbs.UpdateStatus(h.ctx, pdb, metav1.UpdateOptions{})
		return err
	})
	require.NoError(h.t, err)
	return updated
}

// Issue 11 against the real API server: with --use-eviction-api, a real
// PodDisruptionBudget (minAvailable 2 over 3 ready pods: one disruption
// allowed) lets the first eviction through and refuses the next with a
// real 429 carrying the DisruptionBudget cause; the refused pods stay and
// are retried, keeping their deadline. When a replacement becomes ready
// (the test writes the budget's status as the disruption controller would)
// a retry evicts one more; the last is deleted directly once
// --eviction-fallback-after has passed since its deadline, with a Warning
// event.
//
// Bounds (real clock): the first eviction within 2 s of the taint; the
// second within 5 s of the budget allowing it (its next retry is at most
// 2 s away at that point); the fallback DELETE no earlier than the
// deadline /debug/evictions showed + 8 s, and the pod gone by that + 3 s.
func TestEvictionAPIHonoursPDBThenFallsBack(t *testing.T) {
	const fallback = 8 * time.Second
	h := setup(t, "it-pdb")
	node := h.node("node")
	spare := h.node("spare")
	pods := map[string]*corev1.Pod{}
	watches := map[string]*podWatch{}
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		pods[name] = h.readyPod(name, node)
		watches[name] = h.watchPod(pods[name])
	}
	h.webPDB(2)
	alive := func(string) bool { return true }
	h.pdbStatus("web", 3, 3, 2, 1, alive)

	ctrl := h.startController(true, nil, func(o *app.Options) {
		o.UseEvictionAPI = true
		o.EvictionFallbackAfter = fallback
	})
	taint := testenv.NoExecuteTaint("example.com/broken", "true")
	tainted := time.Now()
	_, err := testenv.TaintNode(h.ctx, h.c, node, taint)
	require.NoError(t, err)

	// One eviction accepted, and each of the two other pods refused.
	require.NoError(t, ctrl.calls.waitEvictions(h.ctx, func(evicted, refused map[string][]time.Time) bool {
		return len(evicted) == 1 && len(refused) == 2
	}), "waiting for one eviction and two refusals")
	evicted, refused, _, _ := ctrl.calls.evictionCalls()
	require.Len(t, evicted, 1)
	first := slices.Collect(maps.Keys(evicted))[0]
	require.NotContains(t, refused, first)
	t.Logf("PDB: first eviction accepted %s after the taint; first refusals %s",
		ms(evicted[first][0].Sub(tainted)), refusalTimes(refused, tainted))
	assert.LessOrEqual(t, evicted[first][0].Sub(tainted), 2*time.Second)

	// The server evicted it: its own DisruptionTarget, then the deletion
	// (the kubelet stand-in ends the grace period).
	watches[first].waitDeleted(t, 15*time.Second)
	dt := watches[first].disruptionTarget()
	require.NotNil(t, dt, "the evicted pod carried no DisruptionTarget")
	assert.Equal(t, "EvictionByEvictionAPI", dt.Reason, "set by the API server, not by us")
	pdb, err := h.c.PolicyV1().PodDisruptionBudgets(h.ns).Get(h.ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(0), pdb.Status.DisruptionsAllowed, "the server took the one disruption")
	assert.Contains(t, pdb.Status.DisruptedPods, first, "the server recorded the disruption")

	// The refused pods stay, wait for a retry, and say why: an event, the
	// metric, /debug/evictions with the deadline they keep.
	var rest []string
	for name := range pods {
		if name != first {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		ev, err := h.waitForEvent(h.ctx, pods[name], "Eviction of Pod "+h.ns+"/"+name+" refused by a disruption budget; retrying, falls back to deleting it at ")
		require.NoError(t, err, "no refusal event for %s", name)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	}
	assert.GreaterOrEqual(t, ctrl.evictions(t, "refused"), 2.0)
	deadlines := map[string]time.Time{}
	for _, e := range ctrl.debugEvictions(t) {
		require.Contains(t, rest, e.Name, "/debug/evictions lists %s", e.Name)
		assert.Equal(t, pods[e.Name].UID, e.UID)
		assert.Equal(t, node, e.Node)
		assert.Equal(t, "example.com/broken=true:NoExecute", e.Taint)
		assert.GreaterOrEqual(t, e.Attempts, 1)
		assert.Equal(t, "Cannot evict pod as it would violate the pod's disruption budget.", e.LastError, "the server's message")
		d, err := time.Parse(time.RFC3339Nano, e.Deadline)
		require.NoError(t, err)
		// Untolerated: due when the controller saw the taint.
		assert.False(t, d.Before(taint.TimeAdded.Time), "deadline %s before the taint's TimeAdded", e.Deadline)
		assert.False(t, d.After(evicted[first][0]), "deadline %s after the first eviction", e.Deadline)
		deadlines[e.Name] = d
	}
	require.Len(t, deadlines, 2, "/debug/evictions lists both refused pods")

	// A replacement becomes ready elsewhere; the disruption controller
	// would count it and allow one disruption again.
	replacement := h.readyPod("web-3", spare)
	allowedAt := time.Now()
	h.pdbStatus("web", 3, 3, 2, 1, func(pod string) bool { return pod != first })
	require.NoError(t, ctrl.calls.waitEvictions(h.ctx, func(evicted, _ map[string][]time.Time) bool {
		return len(evicted) == 2
	}), "waiting for the second eviction")
	evicted, _, _, _ = ctrl.calls.evictionCalls()
	var second string
	for name := range evicted {
		if name != first {
			second = name
		}
	}
	require.NotEqual(t, replacement.Name, second, "the replacement is on an untainted node")
	t.Logf("PDB: second eviction accepted %s after the budget allowed it (%s after the taint)",
		ms(evicted[second][0].Sub(allowedAt)), ms(evicted[second][0].Sub(tainted)))
	assert.LessOrEqual(t, evicted[second][0].Sub(allowedAt), 5*time.Second)
	watches[second].waitDeleted(t, 15*time.Second)
	assert.Equal(t, "EvictionByEvictionAPI", watches[second].disruptionTarget().Reason)

	// The last one is refused until its fallback deadline, then deleted
	// directly by us.
	last := rest[0]
	if last == second {
		last = rest[1]
	}
	hard := deadlines[last].Add(fallback)
	watches[last].stays(t, hard)
	gone := watches[last].waitDeleted(t, time.Until(hard.Add(15*time.Second)))
	_, refused, deletes, _ := ctrl.calls.evictionCalls()
	require.NotEmpty(t, deletes[last], "the pod went, but not by the controller's DELETE")
	t.Logf("PDB: fallback DELETE %s after the deadline (%d refusals of it); gone %s after it",
		ms(deletes[last][0].Sub(deadlines[last])), len(refused[last]), ms(gone.Sub(deadlines[last])))
	assert.False(t, deletes[last][0].Before(hard), "DELETE %s after the deadline, before the fallback", ms(deletes[last][0].Sub(deadlines[last])))
	assert.LessOrEqual(t, gone.Sub(hard), 3*time.Second)
	// Retried while refused (backoff 1 s, 2 s, 4 s, … cut at the fallback
	// deadline), and asked once more at the fallback deadline: only a
	// refusal then turns into the DELETE.
	require.GreaterOrEqual(t, len(refused[last]), 2, "retried while refused")
	lastRefusal := refused[last][len(refused[last])-1]
	assert.False(t, lastRefusal.Before(hard), "last refusal %s after the deadline, before the fallback", ms(lastRefusal.Sub(deadlines[last])))
	assert.True(t, lastRefusal.Before(deletes[last][0]), "the DELETE came before the last refusal")
	dt = watches[last].disruptionTarget()
	require.NotNil(t, dt)
	assert.Equal(t, tolerations.ReasonDeletionByTaintManager, dt.Reason, "the fallback is our delete")
	ev, err := h.waitForEvent(h.ctx, pods[last], "Deleting Pod "+h.ns+"/"+last+": its eviction was refused by a disruption budget for ")
	require.NoError(t, err, "no fallback event")
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)

	assert.Equal(t, 2.0, ctrl.evictions(t, "evicted"))
	assert.Equal(t, 1.0, ctrl.evictions(t, "fallback_delete"))
	assert.Equal(t, 0.0, ctrl.evictions(t, "deleted"))
	assert.Equal(t, 0.0, ctrl.evictions(t, "failed"))
	assert.Equal(t, float64(len(refused[rest[0]])+len(refused[rest[1]])), ctrl.evictions(t, "refused"),
		"every refusal the server sent is counted")
	assert.Empty(t, ctrl.debugEvictions(t))
	_, err = h.c.CoreV1().Pods(h.ns).Get(h.ctx, replacement.Name, metav1.GetOptions{})
	assert.NoError(t, err, "the replacement on the untainted node stays")
}

func refusalTimes(refused map[string][]time.Time, since time.Time) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		out = append(out, fmt.Sprintf("%s %s", name, ms(refused[name][0].Sub(since))))
	}
	return strings.Join(out, ", ")
}

// --dry-run against the real API server: the countdowns run as for real,
// but no pod is written to; each pod gets one "Would delete" event when a
// real run would have deleted it, and no more when it changes afterwards.
// Bounds: the untolerated pod's event within 2 s of the taint; the
// tolerating pod's no earlier than its countdown start + 3 s and within
// that + 5 s; both pods still there, untouched, 3 s after that deadline
// (by then the updates made after the events were decided again).
func TestDryRunWouldDeleteOncePerUID(t *testing.T) {
	h := setup(t, "it-dryrun")
	h.oracle.DryRun()
	ctrl := h.startController(true, nil, func(o *app.Options) { o.DryRun = true })
	const key = "example.com/dry"
	node := h.node("node")
	web, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "web"), node)
	require.NoError(t, err)
	db, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "db", corev1.Toleration{
		Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(3 * time.Second),
	}), node)
	require.NoError(t, err)
	watches := []*podWatch{h.watchPod(web), h.watchPod(db)}

	taintedAt := time.Now()
	tainted, err := testenv.TaintNode(h.ctx, h.c, node, testenv.NoExecuteTaint(key, "true"))
	require.NoError(t, err)
	start := countdownStart(t, tainted, key, db)

	_, err = h.waitForEvent(h.ctx, web, "Would delete Pod "+h.ns+"/web (dry run)")
	require.NoError(t, err)
	webSeen := time.Since(taintedAt)
	_, err = h.waitForEvent(h.ctx, db, "Would delete Pod "+h.ns+"/db (dry run)")
	require.NoError(t, err)
	dbSeen := time.Now()
	t.Logf("dry run: web's event seen %s after the taint; db's %s after its countdown start (toleration 3 s)",
		ms(webSeen), ms(dbSeen.Sub(start)))
	assert.LessOrEqual(t, webSeen, 2*time.Second)
	assert.False(t, dbSeen.Before(start.Add(3*time.Second)), "db's event before its deadline")
	assert.LessOrEqual(t, dbSeen.Sub(start), 5*time.Second)

	// The pods change: each is decided again, and stays decided.
	for _, p := range []*corev1.Pod{web, db} {
		_, err := h.c.CoreV1().Pods(h.ns).Patch(h.ctx, p.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"changed":"yes"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	until := start.Add(3*time.Second + 3*time.Second)
	for _, w := range watches {
		w.stays(t, until)
	}
	for _, p := range []*corev1.Pod{web, db} {
		would := h.events(p.Name, "Would delete")
		require.Len(t, would, 1, "one Would delete event for %s", p.Name)
		assert.Equal(t, int32(1), would[0].Count, "recorded once for %s", p.Name)
		assert.Equal(t, p.UID, would[0].InvolvedObject.UID)
		assert.Empty(t, h.events(p.Name, "Marking for deletion"), p.Name)
		assert.Len(t, h.events(p.Name, "Scheduled for deletion at "), 1, "the countdown is visible in a dry run too")
		now, err := h.c.CoreV1().Pods(h.ns).Get(h.ctx, p.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, now.DeletionTimestamp, p.Name)
		assert.Nil(t, condition(now, corev1.DisruptionTarget), p.Name)
	}
	_, _, _, writes := ctrl.calls.evictionCalls()
	assert.Empty(t, writes, "the controller wrote to pods in a dry run")
	assert.Equal(t, 2.0, ctrl.evictions(t, "dry_run"))
	assert.Equal(t, 0.0, ctrl.evictions(t, "deleted"))
	assert.Empty(t, ctrl.debugEvictions(t), "nothing left to do")
}
