package faults_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/internal/kube"
)

// Fault 4. Errors, then slowness, from an HTTP-level proxy: for 30 s it
// answers a seeded 30 % of the controller's pod writes itself, with 500 or
// 503, or applies them and drops the answer (that HTTP/2 stream reset);
// then for 30 s it adds 1 s before every request. Every due pod gets
// exactly one deletionTimestamp (the oracle: a write repeated only after a
// refusal or a lost answer); an applied write whose answer was lost is
// seen as done (the retry finds the pod terminating or gone), not retried
// into a loop; an eviction that keeps failing is never given up, and says
// so while it fails — a Warning event, taintkit_evictions_failing,
// "failingSince" on /debug/evictions — and goes once the errors end;
// deadlines during the slowness are met by deadline + 2 s + 2 × 1 s (an
// eviction is two requests), and those while writes failed by the errors'
// end + the retry policy's longest wait (--eviction-retry-max-backoff) +
// 2 × 1 s. One pod's writes all fail while writes fail at all, so that an
// eviction failing throughout is seen every run, and another's first DELETE
// is applied with its answer lost.
func TestErrorsAndSlowness(t *testing.T) {
	t.Parallel()
	const (
		seed                = 19
		lease, renew, retry = 15 * time.Second, 10 * time.Second, 2 * time.Second
		pods                = 30 // deadlines 5 … 63 s after the taint
		phase               = 30 * time.Second
		failRate            = 0.3
		latency             = time.Second
		errorsBound         = app.DefaultEvictionRetryMaxBackoff + 2*latency // after the errors end: see below
	)
	cl := newCluster(t, 4*time.Minute)
	proxy := cl.newHTTPProxy(seed)
	r := cl.startReplica("a", cl.controllerConfig(proxy.Addr()), lease, renew, retry)
	cl.waitHolder(func(h string) bool { return h == r.Identity() })

	created, added := cl.countdowns("errors", pods, 5*time.Second, 2*time.Second)
	// Every write to this pod fails while writes fail at all: its attempts,
	// 1, 2, 4, 8 and 16 s apart, fail throughout the 30 s of errors.
	doomed := created[0]
	proxy.doom(doomed.Name)
	// And this pod's first DELETE is applied, its answer lost. A finalizer
	// keeps it terminating until the errors end, as a kubelet does for the
	// pod's grace period: its retry finds it terminating, not gone.
	held := created[1]
	proxy.dropNextDelete(held.Name)
	_, err := cl.c.CoreV1().Pods(cl.ns).Patch(cl.ctx, held.Name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	cl.sleepUntil(added.Add(3 * time.Second))
	errStart := time.Now()
	proxy.set(failRate, 0)
	cl.sleepUntil(errStart.Add(phase))
	// The doomed pod's eviction has failed throughout: it is shown failing,
	// not given up.
	list, err := r.debugEvictions(cl.ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(list, func(e app.PendingEvictionJSON) bool { return e.UID == doomed.UID })
	require.GreaterOrEqual(t, i, 0, "the doomed pod's eviction is not on /debug/evictions")
	assert.NotEmpty(t, list[i].FailingSince, "the doomed pod's eviction is not shown failing: %+v", list[i])
	assert.False(t, list[i].Failed, "the doomed pod's eviction was given up: %+v", list[i])
	assert.GreaterOrEqual(t, r.metric(kube.MetricEvictionsFailing, nil), 1.0, kube.MetricEvictionsFailing)
	ctx, cancel := context.WithTimeout(cl.ctx, 10*time.Second)
	ev, err := cl.waitEvent(ctx, doomed.UID, "Failing to delete Pod")
	cancel()
	if assert.NoError(t, err, "no Failing to delete event for the doomed pod") {
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		t.Logf("MEASURED the doomed pod failing since %s after %d attempts; event %q", list[i].FailingSince, list[i].Attempts, ev.Message)
	}
	_, err = cl.c.CoreV1().Pods(cl.ns).Patch(cl.ctx, held.Name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	slowStart := time.Now()
	proxy.set(0, latency)
	cl.sleepUntil(slowStart.Add(phase))
	proxy.set(0, 0)
	slowEnd := time.Now()
	// A pod whose writes failed retries after 1, 2, 4, 8, 16 and then every
	// 30 s (the default retry policy): its next retry may come 30 s after
	// the errors end, and then its two requests take the 1 s of slowness
	// each.
	errors := oracle.FaultWindow{Name: "30 % of pod writes failed", Start: errStart, End: slowStart, After: errorsBound}
	cl.oracle.FaultWithin(errors.Name, errors.Start, errors.End, errors.After)
	cl.oracle.Slow("1 s on every request", slowStart, slowEnd, 2*latency)
	injected, lost := proxy.report()
	for _, id := range lost {
		cl.oracle.AnswerLost(id)
	}
	t.Logf("MEASURED faults injected (seed %d): %v", seed, injected)
	require.NotZero(t, injected["applied, answer dropped"], "no answer was dropped: the test did not test it")

	last := slices.MaxFunc(created, func(x, y *corev1.Pod) int { return deadlineOf(x, added).Compare(deadlineOf(y, added)) })
	until := deadlineOf(last, added)
	if until.Before(slowStart) {
		until = slowStart
	}
	left := cl.waitGoneBy(created, until.Add(errorsBound+15*time.Second))
	assert.Empty(t, left, "pods left: an eviction was given up")
	assert.Zero(t, r.metric(kube.MetricEvictions, map[string]string{"outcome": "failed"}), `taintkit_evictions_total{outcome="failed"}`)
	assert.Zero(t, r.metric(kube.MetricEvictionsFailing, nil), "evictions still failing once every pod went")

	rep, err := cl.oracle.Check()
	require.NoError(t, err)
	during, after := lateness(rep, errors)
	t.Logf("MEASURED %d of %d pods removed; given up: %d; answers lost: %d; writes %v", len(rep.Evictions), pods, len(left), len(lost), rep.Writes)
	t.Logf("MEASURED deletions of the pods due while writes failed: %s after the errors ended (bound %s); of the others: %s after their deadline (bound 2 s + 2 s while slowed)",
		during, errorsBound, after)
	for _, e := range rep.Evictions {
		if e.Late() > 2*time.Second {
			t.Logf("MEASURED %s due %s (fault %q) removed %s after", e.Name, e.DueSince.Format("15:04:05.000"), e.Fault, ms(e.Late()))
		}
	}
	// An applied delete whose answer was lost is seen as done: its retry
	// reads the pod terminating (or gone) and writes nothing.
	for id, n := range rep.AfterLost {
		assert.Zero(t, n, "a delete the server applied (audit %s), its answer lost, was sent %d more times", id, n)
	}
	t.Logf("MEASURED deletes applied with their answers lost: %d, repeated after: %v", len(rep.AfterLost), rep.AfterLost)
	assert.NotEmpty(t, rep.AfterLost, "no delete's answer was lost: the test did not test it")
	assert.Len(t, rep.Evictions, pods, "pods removed by the controller")
	assert.Empty(t, r.Exits(), "the replica exited")
}
