package manager

import (
	"hash/maphash"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/tolerations"
)

// countdowns is what the manager remembers beyond the objects it reads:
//
//   - when it first saw each start time the objects do not record: a
//     NoExecute taint with no TimeAdded, a pod with no PodScheduled time.
//     tolerations' Decide counts an unknown start as "now"; deciding again
//     later would then push the deadline back at every decision, and the
//     eviction, which decides again when it fires, would never find it due
//     (issue 9). first, a [tolerations.Countdowns], remembers them: handlers
//     decide with its Decide, which records and forgets, the eviction and
//     Pending with its Recheck, which only reads;
//   - for each pod with a scheduled eviction, the deadline and the taint it
//     counts down for, so that a deadline moves later only when that taint
//     goes away or the pod is another pod (new UID, or another node). A
//     longer toleration does not postpone an eviction, as upstream keeps its
//     first schedule; a shorter one or a stricter taint brings it earlier.
//
// A pod entry is made when a handler schedules the pod's eviction, and
// forgotten, with the pod's first sight, when a handler cancels it (the pod,
// its node or the node's last NoExecute taint went, or its tolerations now
// tolerate the taints forever) or the eviction deleted the pod; an eviction
// that drops itself forgets the entry and leaves the first sight to the
// handler of the change it saw, which forgets it in first's Decide.
//
// Writers are handlers, which for one node (and its pods) run one at a time
// on the node's shard; the eviction reads, and forgets a pod entry only if it
// is still the one it read. Pod entries are split into stripes by the hash
// of their key, each under a mutex of its own: every handler and eviction
// looks a pod up, and under one mutex for all pods they queued behind each
// other (at 500,000 evictions the mutex profile put a third of the manager's
// lock waits there). Nothing else is done under a stripe's lock.
type countdowns struct {
	first   *tolerations.Countdowns
	seed    maphash.Seed
	stripes [podStripes]podStripe
}

// podStripes is the number of stripes: a power of two, well above the
// number of goroutines that look pods up at once on a machine of a few dozen
// cores (Shards plus MaxConcurrentEvictions, 40 by default).
const podStripes = 64

// podStripe is the part of the pod entries whose key hashes to it.
type podStripe struct {
	mu       sync.Mutex
	pods     map[uint64]podCountdown // by keyHash
	podsPeak int

	_ [64]byte // keep stripes' mutexes off each other's cache lines
}

// podCountdown is a pod's entry. With the key's hash for a key, an entry
// takes a 32-byte map slot rather than the 64 of the entry under its
// namespace and name: at 500,000 pods with scheduled evictions (a mass node
// failure) that is about half as much memory, and less to hash, compare and
// copy when the map grows.
type podCountdown struct {
	pod   uint64 // podHash of the pod's UID and node name: whose entry it is
	taint uint64 // taintHash of the taint whose countdown the deadline ends
	at    int64  // the scheduled deadline, in Unix nanoseconds (years 1678 to 2262); zero means none
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

func newCountdowns(clk clock.PassiveClock, m tolerations.Matcher) *countdowns {
	c := &countdowns{first: tolerations.NewCountdowns(clk, m), seed: maphash.MakeSeed()}
	for i := range c.stripes {
		c.stripes[i].pods = make(map[uint64]podCountdown)
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

// forgetNode forgets the taints of a node that is gone or has no NoExecute
// taint left.
func (c *countdowns) forgetNode(node string) { c.first.ForgetNode(node) }

// pod returns the entry of the pod key.
func (c *countdowns) pod(key types.NamespacedName) (podCountdown, bool) {
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.pods[h]
	return e, ok
}

// setPod stores the entry of the pod key.
func (c *countdowns) setPod(key types.NamespacedName, e podCountdown) {
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pods[h] = e
	st.podsPeak = max(st.podsPeak, len(st.pods))
}

// forgetPod forgets the pod key and its first sight, and reports whether it
// had an entry.
func (c *countdowns) forgetPod(key types.NamespacedName) bool {
	c.first.ForgetPod(key.Namespace, key.Name)
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.forgetPodLocked(h)
}

// forgetPodIf forgets the pod key if its entry is still e (a handler may have
// stored a newer one since the caller read it), and reports whether it did.
func (c *countdowns) forgetPodIf(key types.NamespacedName, e podCountdown) bool {
	h := c.keyHash(key)
	st := c.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur, ok := st.pods[h]; !ok || cur != e {
		return false
	}
	return st.forgetPodLocked(h)
}

func (st *podStripe) forgetPodLocked(h uint64) bool {
	if _, ok := st.pods[h]; !ok {
		return false
	}
	delete(st.pods, h)
	st.pods = rebuildIfShrunk(st.pods, &st.podsPeak)
	return true
}

// sizes returns how many pods have entries, how many pods have a first
// sight remembered, and how many nodes have taints with one.
func (c *countdowns) sizes() (pods, seen, nodes int) {
	for i := range c.stripes {
		st := &c.stripes[i]
		st.mu.Lock()
		pods += len(st.pods)
		st.mu.Unlock()
	}
	seen, nodes = c.first.Len()
	return pods, seen, nodes
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
