package manager

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/tolerations"
)

// handleNode brings the evictions of every pod on the node in line with the
// node's current NoExecute taints. It runs on the node's shard worker.
func (m *Manager) handleNode(_ context.Context, name string) error {
	node, err := m.cfg.GetNode(name)
	switch {
	case apierrors.IsNotFound(err):
		// Deleted: its pods are orphans the pod garbage collector removes;
		// with no node there is no taint to evict them for.
		node = nil
		if l := m.log.V(4); l.Enabled() {
			l.Info("Noticed node deletion", "node", name)
		}
	case err != nil:
		return fmt.Errorf("manager: get node %q: %w", name, err) // retried by the dispatcher
	}

	pods, err := m.cfg.PodsOnNode(name)
	if err != nil {
		return fmt.Errorf("manager: list pods on node %q: %w", name, err)
	}
	if node == nil {
		m.countdowns.ForgetNode(name)
	} else {
		m.countdowns.ObserveNode(node)
	}
	now := m.clock.Now()
	for _, pod := range pods {
		if m.handle(pod, node, now) {
			m.handOverIfReplaced(podKey(pod), pod.UID, name)
		}
	}
	return nil
}

// handle brings the eviction of pod, on node (nil: gone), in line with the
// node's NoExecute taints and its devices' taints. It reports whether it may
// have changed anything: if not, it cannot have undone another handler's
// decision for a pod that replaced this one, and the caller need not hand
// the pod over (handOverIfReplaced).
func (m *Manager) handle(pod *v1.Pod, node *v1.Node, now time.Time) bool {
	devs := m.devices(pod)
	if !hasNoExecute(node) && len(devs) == 0 {
		// The short cut of the original: nothing to decide, only cancel
		// (and let the countdowns forget the pod's deadline).
		m.countdowns.Decide(node, pod)
		return m.cancel(podKey(pod), pod.UID, "node has no NoExecute taints")
	}
	m.reconcile(pod, node, devs, now)
	return true
}

// mayEvictOn reports whether the named node may have a NoExecute taint:
// it has one in the cache, or it could not be read.
func (m *Manager) mayEvictOn(name string) bool {
	node, err := m.cfg.GetNode(name)
	if apierrors.IsNotFound(err) {
		return false
	}
	return err != nil || hasNoExecute(node)
}

// hasNoExecute reports whether node exists and has a NoExecute taint.
func hasNoExecute(node *v1.Node) bool {
	if node == nil {
		return false
	}
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Effect == v1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// handlePod brings one pod's eviction in line with its current node and
// tolerations. It runs on the shard worker of the node the pod was on when
// the event was seen.
func (m *Manager) handlePod(_ context.Context, u podUpdate) error {
	removed := false // by this manager: the deletion seen is its own
	if u.Deleted != 0 {
		// The informer has seen the deletion (its cache is updated before
		// its handlers are called), so no read can show the pod any more:
		// a record that the manager removed it has done its job. A record
		// of a pod recreated under the name since is another pod's.
		removed = m.status.forgetRemoved(u.key(), u.Deleted)
		if !m.holdsAnything(u.key()) {
			// Nothing of the deleted pod's to cancel: the usual end of a
			// pod this manager evicted, whose eviction forgot it already.
			// A pod added since under the name has an item of its own (an
			// add is never merged into a delete's item), which decides for
			// it; so the lister need not be asked, which for a deleted pod
			// means an error allocated per pod.
			return nil
		}
	}
	if !removed && m.cfg.Devices == nil && !m.holdsAnything(u.key()) && !m.mayEvictOn(u.NodeName) {
		// Nothing scheduled to cancel, and no NoExecute taint on the node to
		// schedule one for: the common update, and every pod's at start-up,
		// decided without reading the pod. (What the countdowns remember of
		// the pod, its node's handler forgets when the taint goes.)
		return nil
	}
	pod, err := m.cfg.GetPod(u.Namespace, u.Name)
	switch {
	case apierrors.IsNotFound(err) && removed:
		// What is still scheduled is the eviction once more that a decision
		// repeated while it ran asked for (see schedule): it would have
		// found the pod gone. The pod went as the events said: no
		// "Cancelling deletion" after "Marking for deletion".
		if m.withdraw(u.key()) {
			m.stats.gone.Add(1)
		}
		m.handOverIfReplaced(u.key(), "", u.NodeName)
		return nil
	case apierrors.IsNotFound(err):
		if m.cancel(u.key(), "", "pod deleted") {
			m.handOverIfReplaced(u.key(), "", u.NodeName)
		}
		return nil
	case err != nil:
		return fmt.Errorf("manager: get pod %s: %w", u.key(), err)
	}
	if pod.Spec.NodeName != u.NodeName {
		// The pod moved (or was recreated elsewhere) after this update was
		// queued. Its newer update, sharded by its new node, decides; handling
		// it here would race with that shard.
		return nil
	}
	node, err := m.cfg.GetNode(u.NodeName)
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return fmt.Errorf("manager: get node %q: %w", u.NodeName, err)
	}
	if m.handle(pod, node, m.clock.Now()) {
		m.handOverIfReplaced(u.key(), pod.UID, u.NodeName)
	}
	return nil
}

// holdsAnything reports whether the manager holds anything for the pod key:
// a schedule, a status, an eviction budget's slot or a given-up eviction's
// record. (What the countdowns remember of a deleted pod its delete event
// forgets: ObservePodDeleted.)
func (m *Manager) holdsAnything(key types.NamespacedName) bool {
	if _, ok := m.evictions.GetWorker(key); ok {
		return true
	}
	return m.status.holds(key) || m.budgets.holds(key) || m.failed.holds(key)
}

// handOverIfReplaced is called after a handler acted on the pod key as the
// pod with the given UID (empty: no pod) on node. Sharding by node name
// keeps a node and the pods on it on one worker, but not a pod that moves
// or is deleted and recreated under the same name on another node: that
// node's worker may have decided for the new pod before this handler acted
// on what it read earlier, and a stale cancel would lose the eviction. So
// read the pod again: if it is now another pod or on another node, queue it
// for its current node, whose worker then decides last. (If the new pod is
// not in the lister yet, its own update comes later and decides last.)
func (m *Manager) handOverIfReplaced(key types.NamespacedName, uid types.UID, node string) {
	cur, err := m.cfg.GetPod(key.Namespace, key.Name)
	if err != nil || cur.Spec.NodeName == "" || (cur.UID == uid && cur.Spec.NodeName == node) {
		return
	}
	m.dispatcher.AddLow(podUpdate{Namespace: cur.Namespace, Name: cur.Name, NodeName: cur.Spec.NodeName})
}

// reconcile schedules, moves or cancels the eviction of pod, which is on
// node (nil: gone), a node with NoExecute taints unless devs, the pod's
// devices, has some.
func (m *Manager) reconcile(pod *v1.Pod, node *v1.Node, devs []tolerations.Device, now time.Time) {
	key := podKey(pod)
	if m.status.isRemoved(key, pod.UID) {
		return // removed (or, in a dry run, would have been): nothing to decide
	}
	// Unknown starts count from first sight, and a deadline moves later only
	// when its taint leaves the node: the countdowns remember both. One
	// decision of the node's and the devices' taints: the earliest.
	d := m.decide(node, pod, devs)
	if d.Action == tolerations.Never {
		m.cancel(key, pod.UID, "pod tolerates its node's and devices' NoExecute taints forever")
		return
	}
	// Log arguments are built only if logged: at 100,000 pods a node, the
	// variadic slices and the taints' strings are most of a handler's
	// garbage (every log call below is guarded so).
	if d.Untolerated {
		if l := m.log.V(2); l.Enabled() {
			l.Info("Pod does not tolerate a NoExecute taint", "pod", key, "node", pod.Spec.NodeName, "decision", evictReason{d})
		}
	} else if l := m.log.V(4); l.Enabled() {
		l.Info("Pod tolerates its NoExecute taints until", "pod", key, "node", pod.Spec.NodeName, "at", d.At, "decision", evictReason{d})
	}
	m.byDevice.set(key, isDevice(d))
	if w, ok := m.evictions.GetWorker(key); !ok || !w.FireAt.Equal(d.At) {
		m.countdownStarted(key, pod, d)
	}
	m.schedule(key, now, d.At, now)
}

// countdownStarted records the event that makes a countdown visible: when
// the pod goes and why. It is recorded when a deadline is set or moved, not
// when a decision repeats one.
func (m *Manager) countdownStarted(key types.NamespacedName, pod *v1.Pod, d tolerations.Decision) {
	if m.cfg.Recorder == nil {
		return
	}
	when := d.At.UTC().Format(time.RFC3339Nano)
	if isDevice(d) {
		if d.Untolerated {
			m.event(key, pod.UID, true, v1.EventTypeNormal, "Scheduled for deletion at %s: %s not tolerated", when, d.Cause())
		} else {
			m.event(key, pod.UID, true, v1.EventTypeNormal, "Scheduled for deletion at %s: %s", when, d.Cause())
		}
		return
	}
	if d.Untolerated {
		m.event(key, pod.UID, false, v1.EventTypeNormal, "Scheduled for deletion at %s: taint %s not tolerated", when, d.Taint.ToString())
		return
	}
	for i := range pod.Spec.Tolerations {
		t := &pod.Spec.Tolerations[i]
		if !m.cfg.Matcher.ToleratesTaint(t, &d.Taint) {
			continue
		}
		if t.TolerationSeconds != nil { // the toleration Decide used
			m.event(key, pod.UID, false, v1.EventTypeNormal, "Scheduled for deletion at %s: taint %s not tolerated after %d s",
				when, d.Taint.ToString(), max(*t.TolerationSeconds, 0))
			return
		}
		break
	}
	m.event(key, pod.UID, false, v1.EventTypeNormal, "Scheduled for deletion at %s: taint %s", when, d.Taint.ToString())
}

// schedule makes sure the eviction of key is scheduled at fireAt, decided
// by a handler from the objects it read at now.
func (m *Manager) schedule(key types.NamespacedName, createdAt, fireAt, now time.Time) {
	m.failed.forget(key) // decided again
	w, ok := m.evictions.GetWorker(key)
	switch {
	case ok && w.Running:
		// The running attempt decided from what it read when it started,
		// which may be older than what this handler read: it may be about
		// to drop itself while the pod must go. Withdraw it and schedule
		// anew; the queue starts the new schedule no earlier than fireAt
		// and not before the attempt returns, and it decides again. (A
		// schedule that starts running after GetWorker reads the objects
		// after this handler did, so its decision is no older than ours.)
		m.evictions.CancelWork(key)
		if m.evictions.AddWork(key, createdAt, fireAt) {
			m.idle.scheduled(key)
		}
	case ok && !w.FireAt.After(now) && !fireAt.After(now):
		// Already due (perhaps backing off after a failed delete). Moving
		// it to another past instant would only reset its backoff.
	default:
		// UpdateWork schedules an absent key and moves a scheduled one;
		// the same fireAt changes nothing. reconcile has already applied
		// the rule for moving a deadline later, and deadlines are counted
		// from remembered times, so repeating a decision is a no-op.
		if m.evictions.UpdateWork(key, createdAt, fireAt) {
			m.idle.scheduled(key)
		}
	}
}

// cancel cancels the scheduled eviction of key, if any, with an event about
// the pod uid (empty if the pod is gone), and forgets its countdown. It
// reports whether it changed anything. If not, it cannot have undone another
// handler's decision for a pod that replaced this one, so the caller need not
// hand the pod over (handOverIfReplaced): most cancels find nothing (a pod
// deleted by its own eviction, a node's taint-free update), and the read
// saved is a lister miss, which allocates an error.
func (m *Manager) cancel(key types.NamespacedName, uid types.UID, why string) bool {
	device := m.byDevice.has(key)
	changed, cancelled := m.forgetEviction(key, uid)
	if !cancelled {
		return changed
	}
	m.stats.cancelled.Add(1)
	if l := m.log.V(2); l.Enabled() {
		l.Info("Cancelling deletion", "pod", key, "reason", why)
	}
	if m.cfg.Recorder != nil {
		m.event(key, uid, device, v1.EventTypeNormal, "Cancelling deletion of Pod %s", key)
	}
	return true
}

// withdraw is cancel, for a pod gone, without an event or a count: for the
// schedule left of a pod this manager removed. It reports whether it
// cancelled a schedule.
func (m *Manager) withdraw(key types.NamespacedName) bool {
	_, cancelled := m.forgetEviction(key, "")
	if cancelled {
		if l := m.log.V(4); l.Enabled() {
			l.Info("Dropping the repeated eviction of a pod this manager removed", "pod", key)
		}
	}
	return cancelled
}

// forgetEviction cancels the scheduled eviction of key and forgets its
// countdown (and, once it ends or with the pod gone, its status and its
// place in the budget's line). It reports whether it changed anything and whether it cancelled a
// schedule.
func (m *Manager) forgetEviction(key types.NamespacedName, uid types.UID) (changed, cancelled bool) {
	changed = m.failed.forget(key)
	// CancelWork says false both for nothing scheduled and for a running
	// attempt it withdrew, which is a change: GetWorker tells them apart.
	// Either way nothing follows: the status and the budget's place go now.
	// (A withdrawn attempt that returns forgets them too; one that panics
	// or calls runtime.Goexit is reported to no hook.)
	found := false
	if _, found = m.evictions.GetWorker(key); found {
		cancelled = m.evictions.CancelWork(key)
		changed = true
	}
	if found || uid == "" {
		changed = m.budgets.release(key, m.clock.Now()) || changed
		changed = m.status.forget(key) || changed
		m.byDevice.forget(key)
	}
	return changed, cancelled
}

// event records an event of eventtype about the pod key, with the reason
// TaintManagerEviction, or DeviceTaintManagerEviction if device. Callers on
// a per-pod path check Config.Recorder first: the arguments would be built
// for nothing.
func (m *Manager) event(key types.NamespacedName, uid types.UID, device bool, eventtype, format string, args ...any) {
	if m.cfg.Recorder == nil {
		return
	}
	reason := tolerations.EventReasonTaintManagerEviction
	if device {
		reason = EventReasonDeviceTaintManagerEviction
	}
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: key.Namespace, Name: key.Name, UID: uid}
	m.cfg.Recorder.Eventf(ref, eventtype, reason, format, args...)
}

func podKey(pod *v1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}
