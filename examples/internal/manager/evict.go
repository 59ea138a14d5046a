package manager

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// admit is the eviction queue's admit func when there is a budget: an
// eviction attempt starts only with a token (see budgets).
func (m *Manager) admit(key types.NamespacedName, deadline, now time.Time) time.Time {
	g := m.budgets.take(key, deadline, now)
	switch {
	case !g.ok && g.first:
		m.stats.budgetWaits.Add(1)
		if l := m.log.V(2); l.Enabled() {
			l.Info("Waiting for the eviction budget", "pod", key, "deadline", deadline, "until", g.until)
		}
	case g.ok && g.waited > 0 && m.cfg.Metrics != nil:
		m.cfg.Metrics.BudgetWait(g.waited.Seconds())
	}
	return g.until
}

// waitsForToken reports whether the eviction of key waits in the queue for
// the time wake the budget gave it.
func (m *Manager) waitsForToken(key types.NamespacedName, wake time.Time) bool {
	w, ok := m.evictions.GetWorker(key)
	return ok && !w.Running && w.NextAttempt.Equal(wake)
}

// evict is the eviction queue's work func: it runs when the eviction of key
// is due, and again (with backoff) after each failure it returns. It decides
// again from the current pod and node before deleting anything.
func (m *Manager) evict(ctx context.Context, key types.NamespacedName) error {
	err := m.tryEvict(ctx, key)
	// Not deferred: an attempt that panics or calls runtime.Goexit does not
	// get here, and the queue reports it as it counts it, to evictionRetried
	// or evictionFailed.
	m.returned(key, err)
	return err
}

// returned does the bookkeeping of an eviction attempt that returned err.
// (An attempt that ran was granted its token: it holds no place in the
// budget's line, which take gives up at the grant.)
func (m *Manager) returned(key types.NamespacedName, err error) {
	if err == nil {
		// The eviction ended: the pod went, or no longer has to.
		m.status.forget(key)
		m.byDevice.forget(key)
		return
	}
	switch _, found := m.evictions.GetWorker(key); {
	case !found:
		// Withdrawn by a cancel while it ran: nothing follows it.
		m.status.forget(key)
	case IsRefusedByBudget(err):
		// A wait (timedqueue.RetryAt), not a failure: the refusal recorded
		// itself.
	default:
		// A failure the queue retries (evictionRetried records it too) or
		// gives up on (evictionFailed), or the failure of an attempt
		// withdrawn by a handler that scheduled anew (a decision repeated
		// while it ran): the new schedule keeps the key's refusals (so their
		// backoff goes on) and this error, the latest. An eviction that
		// keeps failing says so, at most every FailureEventInterval.
		st, warn := m.status.failedAt(key, err, m.clock.Now(), m.failureEventInterval)
		if warn {
			m.log.Error(err, "Eviction keeps failing", "pod", key, "since", st.failingSince, "attempts", st.failures)
			verb := "delete"
			if m.cfg.UseEvictionAPI {
				verb = "evict"
			}
			m.event(key, st.uid, m.byDevice.has(key), v1.EventTypeWarning, "Failing to %s Pod %s since %s (%d attempts), retrying: %v",
				verb, key, st.failingSince.UTC().Format(time.RFC3339), st.failures, err)
		}
	}
}

// tryEvict is one attempt of the eviction of key.
func (m *Manager) tryEvict(ctx context.Context, key types.NamespacedName) error {
	pod, err := m.cfg.GetPod(key.Namespace, key.Name)
	switch {
	case apierrors.IsNotFound(err):
		m.stats.gone.Add(1)
		return nil
	case err != nil:
		return fmt.Errorf("manager: get pod %s: %w", key, err)
	}
	if m.status.isRemoved(key, pod.UID) {
		// Removed already (or, in a dry run, would have been): a handler
		// decided from a cache that had not seen it go yet.
		m.stats.gone.Add(1)
		return nil
	}
	if pod.DeletionTimestamp != nil {
		// Already terminating: deleting it again would gain nothing.
		m.stats.terminating.Add(1)
		if l := m.log.V(4); l.Enabled() {
			l.Info("Pod is terminating, not evicting", "pod", key)
		}
		return nil
	}

	var node *v1.Node // none: nothing to evict for
	if pod.Spec.NodeName != "" {
		n, err := m.cfg.GetNode(pod.Spec.NodeName)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("manager: get node %q: %w", pod.Spec.NodeName, err)
		default:
			node = n
		}
	}
	now := m.clock.Now()
	// From the starts and deadlines the countdowns remember; an eviction
	// records none. A deadline that has come for a taint still on the node
	// is owed, whatever the pod's tolerations say now (short of forever): a
	// longer toleration does not postpone an eviction.
	d := m.recheck(node, pod)
	if m.mayBeStale(pod, d) {
		// The scheduler bound the pod after the taint's TimeAdded: it did
		// not see the taint, which may be gone from a node our cache has
		// not caught up with. Decide on the node as the API server has it.
		fresh, err := m.nodeReads.read(ctx, pod.Spec.NodeName)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("manager: read node %q: %w", pod.Spec.NodeName, err)
		}
		d = m.recheck(fresh, pod) // a node gone (NotFound, nil) has no taint
	}
	reason := evictReason{d: d}
	switch d.Action {
	case tolerations.Never:
		// The taints went away, or the tolerations changed, and the handler
		// that cancels this eviction has not run yet (or was coalesced away).
		m.stats.dropped.Add(1)
		if l := m.log.V(2); l.Enabled() {
			l.Info("Eviction no longer due, dropping it", "pod", key)
		}
		if m.cfg.Recorder != nil {
			m.event(key, pod.UID, m.byDevice.has(key), v1.EventTypeNormal, "Cancelling deletion of Pod %s", key)
		}
		return nil
	case tolerations.EvictAt:
		// Not due: a pod recreated under the same name, whose countdown
		// started when it was bound, or a taint whose countdown this was
		// went away and another ends later. Hand it back to its node's
		// shard, whose handler schedules it (after this attempt returns, if
		// it is still running then). Only handlers schedule: an attempt
		// rescheduling itself from what it read could undo a newer decision
		// a handler made meanwhile.
		m.stats.rescheduled.Add(1)
		if l := m.log.V(2); l.Enabled() {
			l.Info("Eviction not due yet, handing it back to be rescheduled", "pod", key, "at", d.At)
		}
		m.dispatcher.AddLow(podUpdate{Namespace: key.Namespace, Name: key.Name, NodeName: pod.Spec.NodeName})
		return nil
	}

	// The pod must go. Its deadline is the schedule's FireAt, which waits
	// and refusals never move.
	deadline := now
	if w, found := m.evictions.GetWorker(key); found {
		deadline = w.FireAt
	}
	if m.cfg.DryRun {
		m.wouldDelete(key, pod, deadline, now, reason)
		return nil
	}
	// Recorded before the write, which its delete event may overtake.
	m.status.startRemoval(key, pod.UID)
	fallback := false
	if m.cfg.UseEvictionAPI {
		var retryAt time.Time
		retryAt, fallback, err = m.evictThroughAPI(ctx, key, pod, deadline, now, reason)
		if !retryAt.IsZero() {
			m.status.endRemoval(key, pod.UID, false)
			return timedqueue.RetryAt(retryAt, err)
		}
	}
	if !m.cfg.UseEvictionAPI || fallback {
		if l := m.log.V(2); l.Enabled() {
			l.Info("Deleting pod", "pod", key, "uid", pod.UID, "node", pod.Spec.NodeName, "reason", reason)
		}
		if !fallback && m.cfg.Recorder != nil && m.status.markOnce(key, pod.UID, deadline) {
			// Once per decision (the pod's UID and deadline), not per
			// attempt: a retry of a recreated pod is another decision.
			m.markingForDeletion(key, pod.UID, d)
		}
		err = m.deletePod(ctx, key, pod, d)
	}
	m.status.endRemoval(key, pod.UID, err == nil)
	switch {
	case err == nil:
		m.stats.evicted.Add(1)
		switch {
		case fallback:
			m.stats.fallbackDeleted.Add(1)
		case m.cfg.UseEvictionAPI:
			m.stats.evictedByAPI.Add(1)
		default:
			m.stats.deleted.Add(1)
		}
		m.observeDelay(deadline, now)
		if m.cfg.Evicted != nil {
			m.cfg.Evicted(pod, d)
		}
	case apierrors.IsNotFound(err):
		m.stats.gone.Add(1)
	case apierrors.IsConflict(err):
		// Recreated under the same name: the retry reads the new pod and
		// decides for it afresh (most likely: not due yet, rescheduled).
		return fmt.Errorf("manager: pod %s was replaced while being evicted: %w", key, err)
	default:
		return fmt.Errorf("manager: evict pod %s: %w", key, err)
	}
	// The pod is gone; so is its countdown (its delete event would say so
	// too, but an informer may coalesce it with a new pod's add, whose
	// memory this keeps).
	m.countdowns.ObservePodDeleted(pod)
	return nil
}

// deletePod sets the pod's DisruptionTarget condition and deletes it, both
// only if it is still the pod with the UID read; d is why it goes.
func (m *Manager) deletePod(ctx context.Context, key types.NamespacedName, pod *v1.Pod, d tolerations.Decision) error {
	// Say why the pod goes before it goes, as Kubernetes does, so that the
	// pod's owner (a Job's pod failure policy, say) can tell.
	cond := v1.PodCondition{
		Type:    v1.DisruptionTarget,
		Status:  v1.ConditionTrue,
		Reason:  tolerations.ReasonDeletionByTaintManager,
		Message: "Taint manager: deleting due to NoExecute taint",
	}
	if isDevice(d) {
		cond.Reason = ReasonDeletionByDeviceTaintManager
		cond.Message = "Device taint manager: deleting due to NoExecute " + d.Cause()
	}
	err := m.cfg.Client.SetPodCondition(ctx, key.Namespace, key.Name, pod.UID, cond)
	if err != nil {
		return err
	}
	// The UID precondition makes the delete a no-op for a pod recreated
	// under the same name since we read it: that pod is someone else.
	return m.cfg.Client.DeletePod(ctx, key.Namespace, key.Name, uidPrecondition(pod.UID))
}

// evictThroughAPI evicts the pod through the Eviction API. If a disruption
// budget refuses, it returns when to try again (a refusal is not a failure),
// or, once the fallback deadline has passed, fallback: delete the pod
// directly. Otherwise it returns the API's error.
func (m *Manager) evictThroughAPI(ctx context.Context, key types.NamespacedName, pod *v1.Pod, deadline, now time.Time, reason evictReason) (retryAt time.Time, fallback bool, err error) {
	st := m.status.get(key)
	if l := m.log.V(2); l.Enabled() {
		l.Info("Evicting pod", "pod", key, "uid", pod.UID, "node", pod.Spec.NodeName, "reason", reason, "refusals", st.refusals)
	}
	if m.cfg.Recorder != nil && m.status.markOnce(key, pod.UID, deadline) {
		m.markingForDeletion(key, pod.UID, reason.d)
	}
	// The API server sets DisruptionTarget itself when it evicts; setting it
	// before a request that may be refused would mark a pod that stays.
	err = m.cfg.Client.(PodEvicter).EvictPod(ctx, key.Namespace, key.Name, uidPrecondition(pod.UID))
	if !IsRefusedByBudget(err) {
		return time.Time{}, false, err
	}
	m.stats.refused.Add(1)
	refusals := m.status.failed(key, err, true)
	after := m.cfg.EvictionFallbackAfter
	hard := deadline.Add(after)
	if after > 0 && !now.Before(hard) {
		m.log.Info("Eviction refused by a disruption budget past the fallback deadline; deleting the pod", "pod", key, "deadline", deadline, "refusals", refusals)
		m.event(key, pod.UID, isDevice(reason.d), v1.EventTypeWarning, "Deleting Pod %s: its eviction was refused by a disruption budget for %s past its deadline %s",
			key, now.Sub(deadline).Round(time.Millisecond), deadline.Format(time.RFC3339))
		return time.Time{}, true, nil
	}
	retryAt = now.Add(m.cfg.EvictionRetry.Backoff(refusals))
	if after > 0 && retryAt.After(hard) {
		retryAt = hard // the fallback is not late for a long backoff
	}
	if l := m.log.V(2); l.Enabled() {
		l.Info("Eviction refused by a disruption budget; will retry", "pod", key, "refusals", refusals, "retryAt", retryAt, "err", err.Error())
	}
	if refusals == 1 {
		fb := "never falls back to deleting it"
		if after > 0 {
			fb = "falls back to deleting it at " + hard.Format(time.RFC3339)
		}
		m.event(key, pod.UID, isDevice(reason.d), v1.EventTypeWarning, "Eviction of Pod %s refused by a disruption budget; retrying, %s", key, fb)
	}
	return retryAt, false, err
}

// wouldDelete is a dry run's deletion: an event and a count, once per pod UID.
func (m *Manager) wouldDelete(key types.NamespacedName, pod *v1.Pod, deadline, now time.Time, reason evictReason) {
	if !m.status.markRemoved(key, pod.UID) {
		return
	}
	m.stats.dryRun.Add(1)
	m.observeDelay(deadline, now)
	if l := m.log.V(2); l.Enabled() {
		l.Info("Dry run: would delete pod", "pod", key, "uid", pod.UID, "node", pod.Spec.NodeName, "reason", reason)
	}
	if m.cfg.Recorder != nil {
		m.event(key, pod.UID, isDevice(reason.d), v1.EventTypeNormal, "Would delete Pod %s (dry run)", key)
	}
}

// markingForDeletion records the event of an eviction that starts: for a
// device's taint, it names the taint, the device and the rule.
func (m *Manager) markingForDeletion(key types.NamespacedName, uid types.UID, d tolerations.Decision) {
	if isDevice(d) {
		m.event(key, uid, true, v1.EventTypeNormal, "Marking for deletion Pod %s: %s", key, d.Cause())
		return
	}
	m.event(key, uid, false, v1.EventTypeNormal, "Marking for deletion Pod %s", key)
}

func (m *Manager) observeDelay(deadline, now time.Time) {
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.EvictionDelay(max(now.Sub(deadline), 0).Seconds())
	}
}

// evictReason says why a pod goes, for the logs. It is a fmt.Stringer,
// formatted only if logged, and boxed only then.
type evictReason struct{ d tolerations.Decision }

func (r evictReason) String() string { return r.d.String() }

func uidPrecondition(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// evictionRetried is the eviction queue's retry hook: an attempt failed
// (returned an error, panicked or called runtime.Goexit) and the schedule w
// will be retried at w.NextAttempt. It records err as the last error, which
// for a panic or a Goexit no one else can: the key keeps its status (the
// refusals go on counting) and its budget slot.
//
// The queue arms the retry before it calls the hook, so the retry may have
// started by now (on a real clock, with a backoff shorter than the hook took
// to be called): what it records or forgets is newer, and the hook must not
// undo it. So err is recorded only if the queue still shows w as the hook
// got it, waiting for that retry, checked under the statuses' lock, which
// the retry's own bookkeeping takes after. If the retry has started, the
// failure is left unrecorded: the retry's end records a newer outcome,
// except a wait for the eviction budget, after which LastError stays one
// failure behind until the next.
func (m *Manager) evictionRetried(w timedqueue.TimedWorker[types.NamespacedName], err error) {
	m.status.failedIf(w.Key, err, func() bool {
		cur, ok := m.evictions.GetWorker(w.Key)
		return ok && !cur.Running && cur.Attempts == w.Attempts && cur.NextAttempt.Equal(w.NextAttempt) &&
			cur.FireAt.Equal(w.FireAt) && cur.CreatedAt.Equal(w.CreatedAt)
	})
}

// evictionFailed is the eviction queue's failure hook: the retries of an
// eviction ran out (a finite EvictionRetry.MaxAttempts), or it failed with
// a Permanent error. The pod stays until its next update or the next
// resync decides again.
func (m *Manager) evictionFailed(w timedqueue.TimedWorker[types.NamespacedName], err error) {
	if m.stopping.Load() {
		// Cut short by Run's end (the queue does not retry while it shuts
		// down): the next leader decides the pod afresh.
		m.log.V(2).Info("Eviction stopped with the manager", "pod", w.Key, "attempts", w.Attempts, "err", err)
		m.status.forget(w.Key)
		return
	}
	m.stats.failed.Add(1)
	st := m.status.get(w.Key)
	m.status.forget(w.Key)
	m.log.Error(err, "Giving up evicting pod", "pod", w.Key, "attempts", w.Attempts)
	p := PendingEviction{
		Namespace: w.Key.Namespace, Name: w.Key.Name, Deadline: w.FireAt,
		Attempts: w.Attempts + st.refusals, LastError: err.Error(), Failed: true,
	}
	if pod, gerr := m.cfg.GetPod(w.Key.Namespace, w.Key.Name); gerr == nil {
		p.UID, p.Node = pod.UID, pod.Spec.NodeName
	}
	m.failed.add(p)
	m.event(w.Key, p.UID, m.byDevice.forget(w.Key), v1.EventTypeWarning, "Gave up deleting Pod %s after %d attempts: %v", w.Key, p.Attempts, err)
}
