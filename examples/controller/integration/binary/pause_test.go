package binary_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// pausedRuns numbers the runs of TestPausedLeaderWritesNothing in one
// process (go test -count=N): each has its own namespace and nodes.
var pausedRuns atomic.Int64

// Two replicas; the leader is frozen (SIGSTOP) while pods on two nodes
// count down. The other replica takes the Lease over; the test removes one
// node's taint and waits for the new leader's "Cancelling deletion" events
// for its pods, then for every pod's deadline to pass (the other node's
// pods evicted by the new leader). Only then is the old leader resumed
// (SIGCONT): its timers for all of them are overdue and fire at once,
// racing its own discovery that it no longer leads. The API server's audit log is the witness: after the
// new leader's first write of the Lease, nothing of the old replica's
// reaches the server (no pod write, no event, whatever the answer would
// have been), the old replica never writes the Lease again (its release
// on the way out leaves the new holder's Lease alone), and the pods whose
// taint was removed are never written by anyone.
func TestPausedLeaderWritesNothing(t *testing.T) {
	const (
		dueAfter    = 8 * time.Second  // the evicted pod's toleration
		sparedAfter = 16 * time.Second // the spared pod's: after the takeover and the taint's removal
		// Past the spared pod's deadline, so that the old leader's timer
		// for it is overdue when it resumes.
		resumeAfterDeadline = time.Second
	)
	n := pausedRuns.Add(1)
	ns := fmt.Sprintf("paused-%d", n)
	e := setup(t, ns, 2*time.Minute, nil)
	ctx, c := e.ctx, e.c

	a := startController(t, e, "replica-a", append(leaderFlags, "-v=2")...)
	b := startController(t, e, "replica-b", append(leaderFlags, "-v=2")...)
	replicas := map[string]*controller{a.Identity(): a, b.Identity(): b}
	first := waitForLease(t, ctx, c, func(l *leaseState) bool { return replicas[l.holder] != nil })
	leader, standby := replicas[first.holder], a
	if leader == a {
		standby = b
	}
	t.Logf("%s (%s) leads, %s (%s) stands by", leader.name, leader.Identity(), standby.name, standby.Identity())
	// A frozen process is resumed before its cleanup's SIGTERM, which it
	// would not see otherwise (cleanups run last registered first).
	t.Cleanup(func() { _ = leader.cmd.Process.Signal(syscall.SIGCONT) })

	taint := testenv.NoExecuteTaint("example.com/paused", "true")
	tolerate := func(d time.Duration) corev1.Toleration {
		return corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(int64(d / time.Second))}
	}
	// Pods per node: each is one more overdue timer racing the old
	// leader's discovery that it no longer leads.
	const perNode = 4
	dueNode, sparedNode := fmt.Sprintf("paused-%d-due", n), fmt.Sprintf("paused-%d-spared", n)
	var due, spared []*corev1.Pod
	for _, p := range []struct {
		node, pod string
		after     time.Duration
		pods      *[]*corev1.Pod
	}{{dueNode, "due", dueAfter, &due}, {sparedNode, "spared", sparedAfter, &spared}} {
		_, err := testenv.CreateNode(ctx, c, p.node, taint)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), p.node, metav1.DeleteOptions{}) })
		for i := range perNode {
			pod, err := testenv.CreateBoundPod(ctx, c, testenv.NewPod(ns, fmt.Sprintf("%s-%d", p.pod, i), tolerate(p.after)), p.node)
			require.NoError(t, err)
			*p.pods = append(*p.pods, pod)
		}
	}
	all := append(append([]*corev1.Pod(nil), due...), spared...)
	// The last pod created on a node has the latest deadline there.
	dueDeadline, sparedDeadline := countdownStart(t, ctx, c, due[perNode-1]).Add(dueAfter), countdownStart(t, ctx, c, spared[perNode-1]).Add(sparedAfter)
	firstSpared := countdownStart(t, ctx, c, spared[0]).Add(sparedAfter)

	// The leader has scheduled them all, and its events about them are on
	// the server: nothing of its own is in flight when it is frozen (a
	// request already past the fence when the process stops would still
	// arrive).
	leader.waitMetric(ctx, "taintkit_evictions_pending", nil, eq(float64(len(all))))
	for _, p := range all {
		_, err := testenv.WaitForEventMessage(ctx, c, ns, p.UID, "Scheduled for deletion")
		require.NoError(t, err)
	}
	stopped := leader.signal(syscall.SIGSTOP)
	t.Logf("froze %s %v before the first deadline", leader.name, dueDeadline.Sub(stopped).Round(time.Millisecond))

	next := waitForLease(t, ctx, c, func(l *leaseState) bool { return l.holder == standby.Identity() })
	t.Logf("MEASURED takeover: %s holds the Lease %v after the freeze", standby.name, next.observed.Sub(stopped).Round(time.Millisecond))
	// A pod due before the takeover goes at it: the freeze is a fault.
	e.oracle.Fault("leader frozen", stopped, next.observed)
	for _, p := range spared {
		standby.waitScheduled(ctx, ns, p.Name)
	}
	_, err := testenv.UntaintNode(ctx, c, sparedNode, taint.Key, taint.Effect)
	require.NoError(t, err)
	untainted := time.Now()
	require.True(t, untainted.Before(firstSpared.Add(-time.Second)),
		"the spared pods' taint was removed %v before their first deadline: the takeover was too slow for this test", firstSpared.Sub(untainted))
	for _, p := range spared {
		_, err = testenv.WaitForEventMessage(ctx, c, ns, p.UID, "Cancelling deletion")
		require.NoError(t, err)
	}
	for _, p := range due {
		_, err = testenv.WaitForPodDeleted(ctx, c, ns, p.Name, p.UID) // evicted, and the kubelet stand-in done
		require.NoError(t, err)
	}

	select {
	case <-time.After(time.Until(sparedDeadline.Add(resumeAfterDeadline))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	require.True(t, leader.running(), "%s exited while frozen", leader.name)
	resumed := leader.signal(syscall.SIGCONT)
	t.Logf("resumed %s after %v; its timers were overdue by %v (due) and %v (spared)", leader.name,
		resumed.Sub(stopped).Round(time.Millisecond), resumed.Sub(dueDeadline).Round(time.Millisecond), resumed.Sub(sparedDeadline).Round(time.Millisecond))

	exitCtx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	assert.Equal(t, 1, leader.wait(exitCtx), "the resumed replica's exit code (it lost the Lease)")
	require.NoError(t, standby.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, standby.wait(exitCtx), "the new leader's exit code after SIGTERM")

	requests, err := oracle.ReadAudit(e.AuditLogPath())
	require.NoError(t, err)
	sparedNames := map[string]bool{}
	for _, p := range spared {
		sparedNames[p.Name] = true
	}
	checkPausedWrites(t, requests, leader.Identity(), standby.Identity(), ns, sparedNames, stopped)
	t.Logf("MEASURED refused at resume: %d requests of %s (its log)", refusedRequests(t, leader), leader.name)
}

// checkPausedWrites checks the audit log's requests: none of old's pod or
// event writes, nor Lease writes, was received after newer's first
// successful write of the Lease after since, and no replica wrote a pod
// of spared.
func checkPausedWrites(t *testing.T, requests []oracle.Request, old, newer, ns string, spared map[string]bool, since time.Time) {
	t.Helper()
	var acquired time.Time
	for _, r := range requests {
		if r.Kind == oracle.LeaseWrite && r.Identity == newer && r.Applied() && r.Received.After(since) &&
			r.Namespace == leaseNamespace && r.Name == leaseName {
			acquired = r.Received
			break
		}
	}
	require.False(t, acquired.IsZero(), "no write of the Lease by %s on record", newer)
	for _, r := range requests {
		if r.Identity == "" {
			continue
		}
		switch r.Kind {
		case oracle.PodDelete, oracle.PodEvict, oracle.PodStatus, oracle.PodOther, oracle.EventWrite:
			if r.Identity == old && !r.Received.Before(acquired) {
				t.Errorf("a write by the old leader reached the server after the new leader acquired the Lease (at %s): %s",
					acquired.Format("15:04:05.000000"), r)
			}
			if r.Namespace == ns && spared[r.Name] && r.Kind != oracle.EventWrite {
				t.Errorf("a write to the pod whose taint was removed: %s", r)
			}
		case oracle.LeaseWrite:
			if r.Identity == old && !r.Received.Before(acquired) {
				t.Errorf("the old leader wrote the Lease after the new leader acquired it (at %s): %s",
					acquired.Format("15:04:05.000000"), r)
			}
		}
	}
}

// countdownStart returns when pod's countdown starts: the later of its
// node's NoExecute taint's TimeAdded and its PodScheduled time.
func countdownStart(t *testing.T, ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) time.Time {
	t.Helper()
	node, err := c.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	return latest(node.Spec.Taints[0].TimeAdded.Time, pod)
}

// waitScheduled waits until the controller's /debug/evictions lists the
// pod namespace/name.
func (p *controller) waitScheduled(ctx context.Context, namespace, name string) {
	p.t.Helper()
	url := strings.TrimSuffix(p.metricsURL(), "/metrics") + app.DebugEvictionsPath
	var last string
	for {
		code, body, err := httpGetAs(ctx, url, p.token)
		last = fmt.Sprint(code, body, err)
		var pending []app.PendingEvictionJSON
		if err == nil && code == http.StatusOK && json.Unmarshal([]byte(body), &pending) == nil {
			for _, e := range pending {
				if e.Namespace == namespace && e.Name == name {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("%s: waiting for %s/%s on %s: last answer %s: %v", p.name, namespace, name, url, last, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// refusedRequests counts the requests the controller's fence refused, as
// its log (-v=2) says.
func refusedRequests(t *testing.T, p *controller) int {
	t.Helper()
	data, err := os.ReadFile(p.logs)
	require.NoError(t, err)
	return strings.Count(string(data), `"Refused a request`)
}
