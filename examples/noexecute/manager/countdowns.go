package manager

import (
	"hash/maphash"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/tolerations"
)

// countdowns is what the manager remembers beyond the objects it reads:
//
//   - when it first saw each start time the objects do not record: a
//     NoExecute taint with no TimeAdded (per node, taint key and effect), a
//     pod with no PodScheduled time (per pod UID and node). tolerations'
//     Decide counts an unknown start as "now"; deciding again later would then
//     push the deadline back at every decision, and the eviction, which
//     decides again when it fires, would never find it due (issue 9);
//   - for each pod with a scheduled eviction, the deadline and the taint it
//     counts down for, so that a deadline moves later only when that taint
//     goes away or the pod is another pod (new UID, or another node). A
//     longer toleration does not postpone an eviction, as upstream keeps its
//     first schedule; a shorter one or a stricter taint brings it earlier.
//
// A pod entry is made when a handler schedules the pod's eviction, and
// forgotten when a handler cancels it (the pod, its node or the node's last
// NoExecute taint went, or its tolerations now tolerate the taints forever)
// or the eviction deleted the pod or dropped itself. A taint entry exists
// only for a NoExecute taint with no TimeAdded, and goes with the taint or
// the node.
//
// Writers are handlers, which for one node (and its pods) run one at a time
// on the node's shard; the eviction reads, and forgets a pod entry only if it
// is still the one it read. Pod entries are split into stripes by the hash
// of their key, each under a mutex of its own: every handler and eviction
// looks a pod up, and under one mutex for all pods they queued behind each
// other (at 500,000 evictions the mutex profile put a third of the manager's
// lock waits there). mu guards the nodes map; nothing else is done under
// either kind of lock.
type countdowns struct {
	seed    maphash.Seed
	stripes [podStripes]podStripe

	mu        sync.Mutex
	nodes     map[string][]taintSeen
	nodesPeak int
}

// podStripes is the number of stripes: a power of two, well above the
// number of goroutines that look pods up at once on a machine of a few dozen
// cores (Shards plus MaxConcurrentEvictions, 40 by default).
const podStripes = 64

// podStripe is the part of the pod entries whose key hashes to it.
type podStripe struct {
	mu       sync.Mutex
	pods     map[uint64]podEntry // by keyHash
	podsPeak int
	seen     map[uint64]int64 // podCountdown.seen where not zero, by keyHash
	seenPeak int

	_ [64]byte // keep stripes' mutexes off each other's cache lines
}

// podCountdown is a pod's entry. Times are Unix nanoseconds, enough for any
// clock reading between the years 1678 and 2262; zero means none.
type podCountdown struct {
	pod   uint64 // podHash of the pod's UID and node name: whose entry it is
	seen  int64  // when the pod was first seen on its node, if it has no PodScheduled time
	taint uint64 // taintHash of the taint whose countdown the deadline ends
	at    int64  // the scheduled deadline
}

// podEntry is how a podCountdown is stored: seen is kept apart, as only pods
// with no PodScheduled time have one. With the key's hash for a key, an entry
// takes a 32-byte map slot rather than the 64 of the podCountdown under its
// namespace and name: at 500,000 pods with scheduled evictions (a mass node
// failure) that is about half as much memory, and less to hash, compare and
// copy when the map grows.
type podEntry struct {
	pod   uint64
	taint uint64
	at    int64
}

// taintSeen is when a NoExecute taint with no TimeAdded was first seen on a
// node.
type taintSeen struct {
	key    string
	effect v1.TaintEffect
	at     time.Time
}

// rebuildAt is the smallest peak size after which a map that has shrunk to a
// quarter of its peak is rebuilt: Go maps never give memory back. Copying
// the quarter that is left costs less than the deletions that shrank it, so
// the rebuilds are amortised O(1) per deletion, and a size hovering around
// a quarter of the peak rebuilds once, not at every step: the rebuilt map's
// peak is its size, a quarter of which is far below. It is small because
// the pod entries are split into podStripes maps, each keeping at most this
// many entries' memory.
const rebuildAt = 256

func newCountdowns() *countdowns {
	c := &countdowns{seed: maphash.MakeSeed(), nodes: make(map[string][]taintSeen)}
	for i := range c.stripes {
		c.stripes[i].pods = make(map[uint64]podEntry)
		c.stripes[i].seen = make(map[uint64]int64)
	}
	return c
}

// stripe returns the stripe of the key with hash h. The high bits choose it:
// the maps' own hashes of h are seeded apart, so any bits would do.
func (c *countdowns) stripe(h uint64) *podStripe { return &c.stripes[h>>(64-6)] }

// keyHash identifies a pod's namespace and name. Two keys collide with
// probability 2⁻⁶⁴: their pods would share an entry, which podHash tells
// apart, so the harm is one countdown restarted.
func (c *countdowns) keyHash(key types.NamespacedName) uint64 {
	return maphash.Comparable(c.seed, key)
}

type podIdentity struct {
	uid  types.UID
	node string
}

// podHash identifies a pod on a node. Two pods (or one pod on two nodes)
// collide with probability 2⁻⁶⁴.
func (c *countdowns) podHash(uid types.UID, node string) uint64 {
	return maphash.Comparable(c.seed, podIdentity{uid, node})
}

type taintIdentity struct {
	key    string
	effect v1.TaintEffect
}

// taintHash identifies a taint on a node by key and effect, as
// v1.Taint.MatchTaint does: a changed value or TimeAdded is the same taint.
func (c *countdowns) taintHash(t *v1.Taint) uint64 {
	return maphash.Comparable(c.seed, taintIdentity{t.Key, t.Effect})
}

// hasTaint reports whether taints hold the taint with hash h.
func (c *countdowns) hasTaint(taints []v1.Taint, h uint64) bool {
	for i := range taints {
		if c.taintHash(&taints[i]) == h {
			return true
		}
	}
	return false
}

// observeTaints gives each taint that has no TimeAdded the time it was first
// seen on the node: remembered, or now. taints are the node's NoExecute
// taints, in a slice the caller owns (TimeAdded pointers are replaced, never
// written through). Remembered taints no longer on the node are forgotten.
// Only a handler of the node may call it.
func (c *countdowns) observeTaints(node string, taints []v1.Taint, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.nodes[node]
	unknown, remembered := 0, 0
	for i := range taints {
		if taints[i].TimeAdded == nil {
			unknown++
			if findTaint(old, &taints[i]) >= 0 {
				remembered++
			}
		}
	}
	if unknown == 0 {
		c.forgetNodeLocked(node)
		return
	}
	// Unless the same taints as before have no TimeAdded, record the ones
	// there are now.
	var seen []taintSeen
	record := remembered != unknown || unknown != len(old)
	if record {
		seen = make([]taintSeen, 0, unknown)
	}
	for i := range taints {
		t := &taints[i]
		if t.TimeAdded != nil {
			continue
		}
		at := now
		if j := findTaint(old, t); j >= 0 {
			at = old[j].at
		}
		t.TimeAdded = &metav1.Time{Time: at}
		if record {
			seen = append(seen, taintSeen{key: t.Key, effect: t.Effect, at: at})
		}
	}
	if record {
		c.nodes[node] = seen
		c.nodesPeak = max(c.nodesPeak, len(c.nodes))
	}
}

// findTaint returns the index of t (by key and effect) in seen, or -1.
func findTaint(seen []taintSeen, t *v1.Taint) int {
	for i := range seen {
		if seen[i].key == t.Key && seen[i].effect == t.Effect {
			return i
		}
	}
	return -1
}

// withRemembered is observeTaints for a reader: it returns taints, a node's
// taints, with the remembered times of NoExecute taints that have no
// TimeAdded filled in, in a copy if there are any, and leaves unremembered
// ones unknown. It records and forgets nothing.
func (c *countdowns) withRemembered(node string, taints []v1.Taint) []v1.Taint {
	unknown := false
	for i := range taints {
		if taints[i].Effect == v1.TaintEffectNoExecute && taints[i].TimeAdded == nil {
			unknown = true
			break
		}
	}
	if !unknown {
		return taints
	}
	taints = tolerations.GetNoExecuteTaints(taints)
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := c.nodes[node]
	for i := range taints {
		t := &taints[i]
		if t.TimeAdded != nil {
			continue
		}
		if j := findTaint(seen, t); j >= 0 {
			t.TimeAdded = &metav1.Time{Time: seen[j].at}
		}
	}
	return taints
}

// forgetNode forgets the taints of a node that is gone or has no NoExecute
// taint left.
func (c *countdowns) forgetNode(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetNodeLocked(node)
}

func (c *countdowns) forgetNodeLocked(node string) {
	if _, ok := c.nodes[node]; !ok {
		return
	}
	delete(c.nodes, node)
	c.nodes = rebuildIfShrunk(c.nodes, &c.nodesPeak)
}

// pod returns the entry of the pod key.
func (c *countdowns) pod(key types.NamespacedName) (podCountdown, bool) {
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.podLocked(h)
}

func (st *podStripe) podLocked(h uint64) (podCountdown, bool) {
	e, ok := st.pods[h]
	if !ok {
		return podCountdown{}, false
	}
	return podCountdown{pod: e.pod, seen: st.seen[h], taint: e.taint, at: e.at}, true
}

// setPod stores the entry of the pod key.
func (c *countdowns) setPod(key types.NamespacedName, e podCountdown) {
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pods[h] = podEntry{pod: e.pod, taint: e.taint, at: e.at}
	st.podsPeak = max(st.podsPeak, len(st.pods))
	if e.seen != 0 {
		st.seen[h] = e.seen
		st.seenPeak = max(st.seenPeak, len(st.seen))
	} else {
		st.forgetSeenLocked(h)
	}
}

// forgetPod forgets the pod key, and reports whether it had an entry.
func (c *countdowns) forgetPod(key types.NamespacedName) bool {
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.forgetPodLocked(h)
}

// forgetPodIf forgets the pod key if its entry is still e: a handler may have
// stored a newer one since the caller read it.
func (c *countdowns) forgetPodIf(key types.NamespacedName, e podCountdown) {
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur, ok := st.podLocked(h); ok && cur == e {
		st.forgetPodLocked(h)
	}
}

func (st *podStripe) forgetPodLocked(h uint64) bool {
	if _, ok := st.pods[h]; !ok {
		return false
	}
	delete(st.pods, h)
	st.pods = rebuildIfShrunk(st.pods, &st.podsPeak)
	st.forgetSeenLocked(h)
	return true
}

func (st *podStripe) forgetSeenLocked(h uint64) {
	if _, ok := st.seen[h]; !ok {
		return
	}
	delete(st.seen, h)
	st.seen = rebuildIfShrunk(st.seen, &st.seenPeak)
}

// sizes returns how many pods and nodes have entries.
func (c *countdowns) sizes() (pods, nodes int) {
	for i := range c.stripes {
		st := &c.stripes[i]
		st.mu.Lock()
		pods += len(st.pods)
		st.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return pods, len(c.nodes)
}

// rebuildIfShrunk returns m, or a copy of m sized to fit if m has shrunk to a
// quarter of a peak of at least rebuildAt entries, or is empty after a peak
// of more than one group of entries; *peak is then reset.
func rebuildIfShrunk[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if (*peak < rebuildAt || len(m) > *peak/4) && (len(m) > 0 || *peak <= 8) {
		return m
	}
	fresh := make(map[K]V, len(m))
	for k, v := range m {
		fresh[k] = v
	}
	*peak = len(fresh)
	return fresh
}

// fromUnixNano returns the time n in loc, the location of the manager's
// clock, so that deadlines read as the clock's times do.
func fromUnixNano(n int64, loc *time.Location) time.Time { return time.Unix(0, n).In(loc) }
