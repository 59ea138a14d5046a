package binary_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// leaderRuns numbers the runs of the tests that kill the leader in one
// process (go test -count=N): each has its own namespace and objects.
var leaderRuns atomic.Int64

// Two replicas; the leader is killed (SIGKILL: no release of the lease) in
// the middle of a pod's 10 s countdown. The other replica takes the lease
// over once it has expired and deletes the pod at the countdown's original
// deadline, which it computes from the taint's TimeAdded and the pod's
// PodScheduled time, not 10 s after it took over.
func TestLeaderKilledDuringCountdown(t *testing.T) {
	killLeaderDuringCountdown(t, "handover", nil, nil, func(e *env, ns string) (*corev1.Pod, time.Time) {
		taint := testenv.NoExecuteTaint("example.com/handover", "true")
		node, err := testenv.CreateNode(e.ctx, e.c, ns+"-node", taint)
		require.NoError(t, err)
		deleteAtEnd(t, "Node", node.Name, e.c.CoreV1().Nodes().Delete)
		pod, err := testenv.CreateBoundPod(e.ctx, e.c, testenv.NewPod(ns, "counting-down", corev1.Toleration{
			Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(int64(killedToleration / time.Second)),
		}), node.Name)
		require.NoError(t, err)
		return pod, latest(node.Spec.Taints[0].TimeAdded.Time, pod)
	})
}

// killedToleration is the toleration of the pod whose leader is killed.
const killedToleration = 10 * time.Second

// latest is when a countdown that starts at added starts for pod: the
// later of added and the pod's PodScheduled time (the stored values).
func latest(added time.Time, pod *corev1.Pod) time.Time {
	start := added
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.LastTransitionTime.After(start) {
			start = cond.LastTransitionTime.Time
		}
	}
	return start
}

// killLeaderDuringCountdown runs two replicas with leaderFlags and flags
// in a namespace of its own (prefix and a number), once prepare (if not
// nil) has done what they need before they start, has countdown make a
// pod whose countdown of killedToleration starts at the time it returns,
// kills the leader 4 s into it, and checks that the other replica takes
// over and deletes the pod at the original deadline (never early, at most
// 2 s late), as the oracle judges too. It returns the oracle's report.
func killLeaderDuringCountdown(t *testing.T, prefix string, flags []string, prepare func(*env), countdown func(e *env, ns string) (*corev1.Pod, time.Time)) *oracle.Report {
	const (
		killAfter = 4 * time.Second // into the countdown
		// The deletion is observed through a watch: late by the watch's
		// delivery, the survivor's queue and the DELETE on a loaded 2-core
		// machine under -race. Never early: the survivor's clock is ours.
		lateBy = 2 * time.Second
		// A takeover waits for the lease to expire, 4 s after the
		// survivor last saw it renewed (every 0.5 s), and for the
		// survivor's next try (every 0.5 s, jittered by up to 1.2×):
		// 3.5 to 5 s after the kill, bounded here with room for the load.
		maxTakeover = 7 * time.Second
	)
	ns := fmt.Sprintf("%s-%d", prefix, leaderRuns.Add(1))
	e := setup(t, ns, 2*time.Minute, nil)
	ctx, c := e.ctx, e.c
	if prepare != nil {
		prepare(e)
	}

	args := append(append(slices.Clone(leaderFlags), "-v=2"), flags...)
	a := startController(t, e, "replica-a", args...)
	b := startController(t, e, "replica-b", args...)
	require.NotEqual(t, a.Identity(), b.Identity(), "replicas need distinct identities")
	replicas := map[string]*controller{a.Identity(): a, b.Identity(): b}

	first := waitForLease(t, ctx, c, func(l *leaseState) bool { return replicas[l.holder] != nil })
	leader := replicas[first.holder]
	standby := a
	if leader == a {
		standby = b
	}
	t.Logf("%s (%s) leads, %s (%s) stands by", leader.name, leader.Identity(), standby.name, standby.Identity())
	leader.waitMetric(ctx, "taintkit_leader", nil, eq(1))
	assert.Equal(t, 0.0, standby.metric(ctx, "taintkit_leader", nil), "the standby's manager does not run")

	pod, start := countdown(e, ns)
	deadline := start.Add(killedToleration)
	t.Logf("countdown from %v to %v", start, deadline)
	// The countdown runs under the first leader.
	leader.waitMetric(ctx, "taintkit_evictions_pending", nil, eq(1))

	select {
	case <-time.After(time.Until(start.Add(killAfter))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	got, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, got.DeletionTimestamp, "deleted before the kill")
	require.True(t, leader.running(), "%s exited before the kill", leader.name)
	killed := leader.signal(syscall.SIGKILL)
	t.Logf("killed %s %v into the countdown, %v before its deadline", leader.name,
		killed.Sub(start).Round(time.Millisecond), deadline.Sub(killed).Round(time.Millisecond))

	next := waitForLease(t, ctx, c, func(l *leaseState) bool { return l.holder == standby.Identity() })
	takeover := next.observed.Sub(killed)
	t.Logf("MEASURED takeover: %s holds the lease %v after the kill (lease 4s, renew 3s, retry 0.5s)",
		standby.name, takeover.Round(time.Millisecond))
	assert.LessOrEqual(t, takeover, maxTakeover, "takeover time")
	assert.Equal(t, first.transitions+1, next.transitions, "leaseTransitions")

	deleting, err := testenv.WaitForPod(ctx, c, ns, pod.Name, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	seen := time.Now()
	require.NoError(t, err)
	assert.Equal(t, pod.UID, deleting.UID)
	t.Logf("MEASURED deletion: %v after the original deadline, %v after the takeover",
		seen.Sub(deadline).Round(time.Millisecond), seen.Sub(next.observed).Round(time.Millisecond))
	assert.False(t, seen.Before(deadline), "deleted %v before the deadline", deadline.Sub(seen))
	assert.LessOrEqual(t, seen.Sub(deadline), lateBy, "deleted late (a countdown restarted at the takeover ends %v after it)", killedToleration)

	// The survivor evicted it; the killed replica died with its countdown.
	standby.waitMetric(ctx, "taintkit_evictions_total", map[string]string{"outcome": "deleted"}, eq(1))
	assert.Equal(t, 1.0, standby.metric(ctx, "taintkit_leader", nil))
	exitCtx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	assert.Equal(t, -1, leader.wait(exitCtx), "the killed leader's exit code (killed by a signal)")
	assert.True(t, standby.running(), "the survivor still runs")

	// The oracle, once the survivor has stopped: the survivor removed the
	// pod at the deadline the oracle computed from its own watch.
	standby.signal(syscall.SIGTERM)
	assert.Equal(t, 0, standby.wait(exitCtx), "the survivor's exit code after SIGTERM")
	rep := e.verify(t)
	if assert.Len(t, rep.Evictions, 1, "the oracle's evictions") {
		ev := rep.Evictions[0]
		assert.Equal(t, standby.Identity(), ev.Identity, "the survivor removed it")
		assert.True(t, ev.Deadline.Equal(deadline), "the oracle's deadline %v, the test's %v", ev.Deadline, deadline)
	}
	return rep
}
