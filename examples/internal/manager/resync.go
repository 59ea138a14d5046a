package manager

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/tolerations"
)

// resyncLoop looks again at the pods on NoExecute-tainted nodes every
// ResyncPeriod until ctx is done: the level-triggered net under the
// event-driven handlers, so that whatever a pod's eviction was missed for
// (an event lost, a retry policy that ran out, a bug), it is not missed
// for long.
func (m *Manager) resyncLoop(ctx context.Context) {
	period := m.cfg.ResyncPeriod
	if period == 0 {
		period = DefaultResyncPeriod
	}
	var suspects map[types.NamespacedName]types.UID
	for {
		t := m.clock.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		suspects = m.resync(suspects)
	}
}

// resync looks, from the caches and with no request, for the pods on
// NoExecute-tainted nodes that must go (now or at a deadline) and have no
// eviction scheduled, and returns them. Those it found at the previous
// look too (the same pod, by UID) were missed: it counts them and hands
// them to their node's shard, whose handler schedules them. One look is
// not enough, as a pod's update may be queued for its handler.
func (m *Manager) resync(prev map[types.NamespacedName]types.UID) map[types.NamespacedName]types.UID {
	nodes, err := m.cfg.ListNodes()
	if err != nil {
		m.log.Error(err, "Resync: listing nodes")
		return prev
	}
	var next map[types.NamespacedName]types.UID
	for _, node := range nodes {
		if !hasNoExecute(node) {
			continue
		}
		pods, err := m.cfg.PodsOnNode(node.Name)
		if err != nil {
			m.log.Error(err, "Resync: listing pods", "node", node.Name)
			continue
		}
		for _, pod := range pods {
			if !m.missed(node, pod) {
				continue
			}
			key := podKey(pod)
			if uid, ok := prev[key]; !ok || uid != pod.UID {
				if next == nil {
					next = make(map[types.NamespacedName]types.UID)
				}
				next[key] = pod.UID
				continue
			}
			m.stats.resyncFound.Add(1)
			m.log.Info("Resync found a pod that must go with no eviction scheduled", "pod", key, "node", node.Name)
			m.dispatcher.AddLow(podUpdate{Namespace: pod.Namespace, Name: pod.Name, NodeName: node.Name})
		}
	}
	return next
}

// missed reports whether pod, on node, must go and has no eviction
// scheduled, nor one that ended with its removal.
func (m *Manager) missed(node *v1.Node, pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName != node.Name {
		return false
	}
	key := podKey(pod)
	if _, ok := m.evictions.GetWorker(key); ok || m.status.isRemoved(key, pod.UID) {
		return false
	}
	return m.recheck(node, pod).Action != tolerations.Never
}
