package faults_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// Fault 2. Watches that expire: the API server serves watches from etcd
// (--watch-cache=false) and compacts etcd every 2 s, and a TCP proxy cuts
// the controller's connections for 20 s. The fault is real: the test's own
// watch, resumed from the resourceVersion before the cut, gets 410 Gone.
// The controller relists; a taint added during the cut is acted on (its
// untolerating pods removed by the cut's end + 5 s), countdowns that ended
// during the cut are met by its end + 5 s, later ones within 2 s; nothing
// is missed. The lease (45 s, renew 30 s) outlasts the cut.
func TestWatchExpiresDuringCut(t *testing.T) {
	t.Parallel()
	const (
		lease, renew, retry = 45 * time.Second, 30 * time.Second, 2 * time.Second
		cutAt               = 6500 * time.Millisecond // after the first taint; its deadlines are 4 … 30 s after it, on whole seconds: the cut falls between two
		cutFor              = 20 * time.Second
	)
	cl := newCluster(t, 3*time.Minute, "--watch-cache=false", "--etcd-compaction-interval=2s")
	proxy := cl.newTCPProxy("watch")
	r := cl.startReplica("a", cl.controllerConfig(proxy.Addr()), lease, renew, retry)
	cl.waitHolder(func(h string) bool { return h == r.Identity() })

	counting, added := cl.countdowns("counting", 14, 4*time.Second, 2*time.Second)
	// A second node, untainted until the cut: its pods tolerate nothing.
	_, err := testenv.CreateNode(cl.ctx, cl.c, "later")
	require.NoError(t, err)
	var untolerating []*corev1.Pod
	for _, name := range []string{"later-a", "later-b", "later-c"} {
		p, err := testenv.CreateBoundPod(cl.ctx, cl.c, testenv.NewPod(cl.ns, name), "later")
		require.NoError(t, err)
		untolerating = append(untolerating, p)
	}

	cl.sleepUntil(added.Add(cutAt))
	before, err := cl.c.CoreV1().Pods(cl.ns).List(cl.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	cutStart := time.Now()
	proxy.cut()
	t.Logf("cut the controller's connections at resourceVersion %s", before.ResourceVersion)
	cl.sleepUntil(cutStart.Add(5 * time.Second))
	tainted, err := testenv.TaintNode(cl.ctx, cl.c, "later", testenv.NoExecuteTaint("example.com/during-cut", "true"))
	require.NoError(t, err)
	t.Logf("tainted node later during the cut (TimeAdded %s)", tainted.Spec.Taints[0].TimeAdded.Format(time.RFC3339))
	cl.sleepUntil(cutStart.Add(cutFor))

	// The fault is real: a watch resumed from before the cut is refused.
	w, err := cl.c.CoreV1().Pods(cl.ns).Watch(cl.ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	var gone bool
	if err != nil {
		gone = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	} else {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				status := apierrors.FromObject(ev.Object)
				var se apierrors.APIStatus
				gone = errors.As(status, &se) && se.Status().Code == http.StatusGone
				t.Logf("the test's watch from resourceVersion %s: %v", before.ResourceVersion, status)
				break
			}
		}
		w.Stop()
	}
	require.True(t, gone, "a watch from resourceVersion %s, before the cut, was not refused with 410 Gone (err %v)", before.ResourceVersion, err)

	proxy.restore()
	cutEnd := time.Now()
	fault := oracle.FaultWindow{Name: "connections cut, watches expired", Start: cutStart, End: cutEnd}
	cl.oracle.Fault(fault.Name, fault.Start, fault.End)
	t.Logf("MEASURED cut: %s", ms(cutEnd.Sub(cutStart)))

	all := append(slices.Clone(counting), untolerating...)
	last := slices.MaxFunc(counting, func(x, y *corev1.Pod) int { return deadlineOf(x, added).Compare(deadlineOf(y, added)) })
	cl.waitGone(all, time.Until(deadlineOf(last, added).Add(30*time.Second)))
	rep, err := cl.oracle.Check()
	require.NoError(t, err)
	during, after := lateness(rep, fault)
	t.Logf("MEASURED deletions of the %d pods due during the cut: %s after its end (bound 5 s); of the %d due outside it: %s after their deadline (bound 2 s)",
		len(during.late), during, len(after.late), after)
	for _, e := range rep.Evictions {
		if slices.ContainsFunc(untolerating, func(p *corev1.Pod) bool { return p.UID == e.UID }) {
			t.Logf("MEASURED %s (tainted during the cut) removed %s after the cut ended", e.Name, ms(e.Deleted.Sub(cutEnd)))
		}
	}
	assert.Len(t, rep.Evictions, len(all), "pods removed by the controller")
	assert.Empty(t, r.Exits(), "the replica exited")
}
