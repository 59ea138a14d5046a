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

// evict is the eviction queue's work func: it runs when the eviction of key
// is due, and again (with backoff) after each failure it returns. It decides
// again from the current pod and node before deleting anything.
func (m *Manager) evict(ctx context.Context, key types.NamespacedName) (err error) {
	pod, err := m.cfg.GetPod(key.Namespace, key.Name)
	switch {
	case apierrors.IsNotFound(err):
		m.stats.gone.Add(1)
		return nil
	case err != nil:
		return fmt.Errorf("manager: get pod %s: %w", key, err)
	}
	if pod.DeletionTimestamp != nil {
		// Already terminating: deleting it again would gain nothing.
		m.stats.terminating.Add(1)
		m.log.V(4).Info("Pod is terminating, not evicting", "pod", key)
		return nil
	}

	var taints []v1.Taint
	if pod.Spec.NodeName != "" {
		node, err := m.cfg.GetNode(pod.Spec.NodeName)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("manager: get node %q: %w", pod.Spec.NodeName, err)
		default:
			taints = m.countdowns.withRemembered(pod.Spec.NodeName, node.Spec.Taints)
		}
	}
	now := m.clock.Now()
	e, ok := m.countdowns.pod(key)
	if ok && e.pod != m.countdowns.podHash(pod.UID, pod.Spec.NodeName) {
		ok = false // another pod's (or on another node): nothing of it counts
	}
	boundAt, known := tolerations.PodBoundAt(pod)
	if !known && ok && e.seen != 0 {
		boundAt = fromUnixNano(e.seen, now.Location())
	}
	d := m.cfg.Matcher.Decide(taints, pod.Spec.Tolerations, boundAt, now)
	// A deadline that has come for a taint still on the node is owed,
	// whatever the pod's tolerations say now (short of forever): a longer
	// toleration does not postpone an eviction.
	owed := ok && e.at != 0 && e.at <= now.UnixNano() && m.countdowns.hasTaint(taints, e.taint)
	var reason any = d // a fmt.Stringer, formatted only if logged
	switch {
	case d.Action == tolerations.Never:
		// The taints went away, or the tolerations changed, and the handler
		// that cancels this eviction has not run yet (or was coalesced away).
		if ok {
			m.countdowns.forgetPodIf(key, e)
		}
		m.stats.dropped.Add(1)
		m.log.V(2).Info("Eviction no longer due, dropping it", "pod", key)
		m.event(key, pod.UID, "Cancelling deletion of Pod %s", key)
		return nil
	case d.Action == tolerations.EvictAt && owed:
		reason = fmt.Sprintf("deadline %s kept (tolerations now allow %s)",
			fromUnixNano(e.at, now.Location()).Format(time.RFC3339Nano), d.At.Format(time.RFC3339Nano))
	case d.Action == tolerations.EvictAt:
		// Not due: a pod recreated under the same name, whose countdown
		// started when it was bound, or a taint whose countdown this was
		// went away and another ends later. Hand it back to its node's
		// shard, whose handler schedules it (after this attempt returns, if
		// it is still running then). Only handlers schedule: an attempt
		// rescheduling itself from what it read could undo a newer decision
		// a handler made meanwhile.
		m.stats.rescheduled.Add(1)
		m.log.V(2).Info("Eviction not due yet, handing it back to be rescheduled", "pod", key, "at", d.At)
		m.dispatcher.AddLow(podUpdate{Namespace: key.Namespace, Name: key.Name, NodeName: pod.Spec.NodeName})
		return nil
	}

	m.log.V(2).Info("Deleting pod", "pod", key, "uid", pod.UID, "node", pod.Spec.NodeName, "reason", reason)
	// Recorded on every attempt, retries included, as each attempt decides
	// afresh that the pod must go (a retry may be for a recreated pod).
	m.event(key, pod.UID, "Marking for deletion Pod %s", key)
	// Say why the pod goes before it goes, as Kubernetes does, so that the
	// pod's owner (a Job's pod failure policy, say) can tell.
	err = m.cfg.Client.SetPodCondition(ctx, key.Namespace, key.Name, pod.UID, v1.PodCondition{
		Type:    v1.DisruptionTarget,
		Status:  v1.ConditionTrue,
		Reason:  tolerations.ReasonDeletionByTaintManager,
		Message: "Taint manager: deleting due to NoExecute taint",
	})
	if err == nil {
		// The UID precondition makes the delete a no-op for a pod recreated
		// under the same name since we read it: that pod is someone else.
		uid := pod.UID
		err = m.cfg.Client.DeletePod(ctx, key.Namespace, key.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid},
		})
	}
	switch {
	case err == nil:
		m.stats.evicted.Add(1)
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
	// too, but an informer may coalesce it with a new pod's add).
	if ok {
		m.countdowns.forgetPodIf(key, e)
	}
	return nil
}

// evictionFailed is the eviction queue's failure hook: the retries of an
// eviction ran out. The pod stays until its next update decides again.
func (m *Manager) evictionFailed(w timedqueue.TimedWorker[types.NamespacedName], err error) {
	m.stats.failed.Add(1)
	m.log.Error(err, "Giving up evicting pod", "pod", w.Key, "attempts", w.Attempts)
}
