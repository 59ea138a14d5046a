package manager

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// Pending returns every scheduled eviction (waiting for its deadline,
// running, waiting for a retry, a budget's token or a refusal's backoff)
// and every eviction given up until the pod is decided again (Failed),
// sorted by deadline, then namespace and name. It reads the pods and nodes
// through the Config's lookups, so it costs O(n) of them: it is for a debug
// endpoint or a test, not a hot path. Each entry is consistent on its own;
// the list is not a snapshot taken at one instant.
func (m *Manager) Pending() []PendingEviction {
	ws := m.evictions.AppendWorkers(nil)
	out := make([]PendingEviction, 0, len(ws))
	nodes := make(map[string]*v1.Node) // each node, read once
	for _, w := range ws {
		out = append(out, m.pending(w, nodes))
	}
	out = m.failed.appendTo(out)
	slices.SortFunc(out, func(a, b PendingEviction) int {
		return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func (m *Manager) pending(w timedqueue.TimedWorker[types.NamespacedName], nodes map[string]*v1.Node) PendingEviction {
	st := m.status.get(w.Key)
	p := PendingEviction{
		Namespace:    w.Key.Namespace,
		Name:         w.Key.Name,
		Deadline:     w.FireAt,
		Attempts:     w.Attempts + st.refusals,
		LastError:    st.lastErr,
		FailingSince: st.failingSince,
	}
	pod, err := m.cfg.GetPod(w.Key.Namespace, w.Key.Name)
	if err != nil {
		return p
	}
	p.UID, p.Node = pod.UID, pod.Spec.NodeName
	if p.Node == "" {
		return p
	}
	node, seen := nodes[p.Node]
	if !seen {
		node, _ = m.cfg.GetNode(p.Node) // nil if gone
		nodes[p.Node] = node
	}
	if d := m.recheck(node, pod); d.Action != tolerations.Never {
		p.Taint, p.Device, p.Rule = d.Taint, d.Device, d.Rule
	}
	return p
}
