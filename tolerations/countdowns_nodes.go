package tolerations

import (
	"hash/maphash"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/internal/mapshrink"
)

// observeNode records node's NoExecute taints (see ObserveNode), returns
// them as remembered (copies whose TimeAdded is their start) and reports
// whether they changed.
func (c *Countdowns) observeNode(node *v1.Node, now time.Time) ([]v1.Taint, bool) {
	n := 0
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Effect == v1.TaintEffectNoExecute {
			n++
		}
	}
	if n == 0 && c.nodeCount.Load() == 0 {
		return nil, false
	}
	st := c.nodeStripe(node.Name)
	st.mu.Lock()
	defer st.mu.Unlock()
	if n == 0 {
		return nil, c.forgetNodeLocked(st, node.Name)
	}
	old := st.m[node.Name]
	if unchanged(old, node.Spec.Taints, n) {
		return old, false // the common case: nothing new, nothing gone, nothing earlier
	}
	cur := make([]v1.Taint, 0, n)
	starts := make([]metav1.Time, n)
	for i := range node.Spec.Taints {
		t := node.Spec.Taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		start := now
		if t.TimeAdded != nil && !t.TimeAdded.IsZero() {
			start = t.TimeAdded.Time
		}
		if j := findTaint(old, t.Key, t.Effect); j >= 0 && old[j].TimeAdded.Time.Before(start) {
			start = old[j].TimeAdded.Time
		}
		starts[len(cur)] = metav1.Time{Time: start}
		t.TimeAdded = &starts[len(cur)]
		cur = append(cur, t)
	}
	if old == nil {
		c.nodeCount.Add(1)
	}
	st.m[node.Name] = cur
	st.peak = max(st.peak, len(st.m))
	return cur, true
}

// unchanged reports whether old, a node's remembered NoExecute taints,
// still stand for taints, which have n NoExecute taints: the same keys,
// effects and values, none with a TimeAdded earlier than remembered.
func unchanged(old, taints []v1.Taint, n int) bool {
	if len(old) != n {
		return false
	}
	for i := range taints {
		t := &taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		j := findTaint(old, t.Key, t.Effect)
		if j < 0 || old[j].Value != t.Value || t.TimeAdded != nil && !t.TimeAdded.IsZero() && t.TimeAdded.Time.Before(old[j].TimeAdded.Time) {
			return false
		}
	}
	return true
}

// rememberedTaints returns the remembered NoExecute taints of node.
func (c *Countdowns) rememberedTaints(node string) []v1.Taint {
	if c.nodeCount.Load() == 0 {
		return nil
	}
	st := c.nodeStripe(node)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.m[node]
}

// forgetNodeLocked forgets node and reports whether it was remembered.
func (c *Countdowns) forgetNodeLocked(st *nodeStripe, node string) bool {
	if _, ok := st.m[node]; !ok {
		return false
	}
	delete(st.m, node)
	c.nodeCount.Add(-1)
	st.m = mapshrink.Fit(shrinkPolicy, st.m, &st.peak)
	return true
}

// findTaint returns the index of the taint with key and effect in taints,
// or -1. Kubernetes allows one taint per key and effect.
func findTaint(taints []v1.Taint, key string, effect v1.TaintEffect) int {
	for i := range taints {
		if taints[i].Key == key && taints[i].Effect == effect {
			return i
		}
	}
	return -1
}

// taintIdentity is a NoExecute taint on a node: its key and effect, as
// v1.Taint.MatchTaint tells taints apart, and its start. A taint that leaves
// the node and comes back has a new start, so it is another taint.
type taintIdentity struct {
	key    string
	effect v1.TaintEffect
	start  int64
}

// taintID returns the hash of taint's identity, its start taken from
// remembered as [Matcher.decideFromStarts] takes it. Two taints collide with
// probability 2⁻⁶⁴.
func (c *Countdowns) taintID(taint *v1.Taint, remembered []v1.Taint) uint64 {
	var start int64
	if s := taintStart(taint, remembered); !s.IsZero() {
		start = s.UnixNano()
	}
	return maphash.Comparable(c.seed, taintIdentity{taint.Key, taint.Effect, start})
}

// findTaintID returns the index in taints of the NoExecute taint whose
// taintID is id, or -1.
func (c *Countdowns) findTaintID(taints, remembered []v1.Taint, id uint64) int {
	for i := range taints {
		if taints[i].Effect == v1.TaintEffectNoExecute && c.taintID(&taints[i], remembered) == id {
			return i
		}
	}
	return -1
}
