package tolerations

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Countdowns decides evictions as [Matcher.Decide] does, and remembers when
// it first saw each start that Kubernetes did not record: a NoExecute taint
// with no TimeAdded (by node and taint key), a pod with no PodScheduled time
// (by namespace and name, told apart by UID and node). Deciding again gives
// the same deadline, and the eviction comes; [Decide] alone counts an unknown
// start from each call's now, so a caller deciding on every update never
// evicts.
//
// It is safe for concurrent use by multiple goroutines. It keeps a few dozen
// bytes per node with such a taint and per such pod with a countdown, and
// gives them back as they are forgotten. The zero value is not usable; call
// [NewCountdowns].
type Countdowns struct {
	clock   clock.PassiveClock
	matcher Matcher
	seed    maphash.Seed

	pods  [stripes]podStripe
	nodes [stripes]nodeStripe
	// podCount and nodeCount are the entries of all stripes: at zero, a
	// decision that needs nothing remembered takes no lock.
	podCount, nodeCount atomic.Int64
}

// stripes is how many maps, each under its own mutex, the pods (and the
// nodes) are split into by hash, so that goroutines deciding for different
// pods seldom wait for each other.
const stripes = 32

// podStripe holds the pods whose key hashes to it.
type podStripe struct {
	mu   sync.Mutex
	m    map[uint64]podSeen // by podKey
	peak int
	_    [40]byte // keep stripes' mutexes off each other's cache lines
}

// podSeen is when a pod was first seen with a countdown. With the key's
// hash for a key, a map slot takes 24 bytes; two keys, or two pods under one
// key, collide with probability 2⁻⁶⁴, and then one pod counts from the
// other's first sight.
type podSeen struct {
	id uint64 // podID of the pod's UID and node
	at int64  // Unix nanoseconds, enough for any clock reading from 1678 to 2262
}

// nodeStripe holds the nodes whose name hashes to it.
type nodeStripe struct {
	mu   sync.Mutex
	m    map[string][]taintSeen // never modified once stored: readers use it unlocked
	peak int
	_    [40]byte
}

// taintSeen is when a NoExecute taint with no TimeAdded was first seen on a
// node. Kubernetes allows one taint per key and effect, so among a node's
// NoExecute taints the key is enough.
type taintSeen struct {
	key string
	at  time.Time
}

// NewCountdowns returns a Countdowns that matches as m does and reads the
// time from clk (nil means [clock.RealClock]).
func NewCountdowns(clk clock.PassiveClock, m Matcher) *Countdowns {
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Countdowns{clock: clk, matcher: m, seed: maphash.MakeSeed()}
	for i := range stripes {
		c.pods[i].m = make(map[uint64]podSeen)
		c.nodes[i].m = make(map[string][]taintSeen)
	}
	return c
}

// Decide decides for pod on node at the clock's now, as [Matcher.Decide]
// does, counting an unknown taint start from the first call that saw the
// taint on node, and an unknown pod start from the first call that gave the
// pod a countdown (Action not Never, Untolerated false). It forgets the
// taints it no longer sees on node, and the pod when it decides Never, when
// the pod has a PodScheduled time, or when node is nil (deleted), which
// decides Never. Call it on every update of a pod and of its node; it
// allocates only when a node's set of unknown taints changes.
func (c *Countdowns) Decide(node *v1.Node, pod *v1.Pod) Decision {
	return c.decide(node, pod, true)
}

// Recheck decides as [Countdowns.Decide] does from what c remembers, but
// records and forgets nothing: an unknown start c has not seen counts as now.
// It is for a scheduled eviction that checks, when it fires, that the pod is
// still due, while handlers of newer updates may be calling Decide.
func (c *Countdowns) Recheck(node *v1.Node, pod *v1.Pod) Decision {
	return c.decide(node, pod, false)
}

// ForgetPod forgets the pod named namespace/name; call it when the pod is
// deleted. A pod created later under the name counts from its own first
// sight even if it is not called.
func (c *Countdowns) ForgetPod(namespace, name string) {
	if c.podCount.Load() == 0 {
		return
	}
	c.forgetPod(c.podKey(namespace, name))
}

// ForgetNode forgets the taints of the node named name; call it when the
// node is deleted. Its pods are forgotten by ForgetPod, or by Decide.
func (c *Countdowns) ForgetNode(name string) {
	if c.nodeCount.Load() == 0 {
		return
	}
	st := &c.nodes[maphash.String(c.seed, name)%stripes]
	st.mu.Lock()
	defer st.mu.Unlock()
	c.forgetNodeLocked(st, name)
}

// Len returns how many pods and nodes c remembers a first sight for.
func (c *Countdowns) Len() (pods, nodes int) {
	return int(c.podCount.Load()), int(c.nodeCount.Load())
}

func (c *Countdowns) decide(node *v1.Node, pod *v1.Pod, record bool) Decision {
	if pod == nil {
		return Decision{}
	}
	now := c.clock.Now()
	if now.IsZero() {
		return Decision{} // as Matcher.Decide: refuse to evict, and keep what is remembered
	}
	if node == nil {
		if record {
			c.ForgetPod(pod.Namespace, pod.Name)
		}
		return Decision{}
	}
	var seen []taintSeen
	if record {
		seen = c.observeTaints(node.Name, node.Spec.Taints, now)
	} else {
		seen = c.rememberedTaints(node.Name)
	}
	boundAt, known := PodBoundAt(pod)
	remembered := false
	if !known && c.podCount.Load() > 0 {
		if at, ok := c.rememberedPod(c.podKey(pod.Namespace, pod.Name), c.podID(pod.UID, node.Name)); ok {
			boundAt, remembered = time.Unix(0, at).In(now.Location()), true
		}
	}
	d := c.matcher.decide(node.Spec.Taints, pod.Spec.Tolerations, boundAt, now, seen)
	if !record {
		return d
	}
	switch countdown := d.Action != Never && !d.Untolerated; {
	case !known && countdown && !remembered:
		c.rememberPod(c.podKey(pod.Namespace, pod.Name), c.podID(pod.UID, node.Name), now.UnixNano())
	case known || !countdown:
		c.ForgetPod(pod.Namespace, pod.Name)
	}
	return d
}

// podKey identifies a pod by namespace and name.
func (c *Countdowns) podKey(namespace, name string) uint64 {
	return maphash.Comparable(c.seed, types.NamespacedName{Namespace: namespace, Name: name})
}

type podIdentity struct {
	uid  types.UID
	node string
}

// podID identifies a pod on a node: a pod recreated under its name, or
// bound to another node, is another pod with a countdown of its own.
func (c *Countdowns) podID(uid types.UID, node string) uint64 {
	return maphash.Comparable(c.seed, podIdentity{uid, node})
}

func (c *Countdowns) podStripe(key uint64) *podStripe { return &c.pods[key%stripes] }

func (c *Countdowns) rememberedPod(key, id uint64) (int64, bool) {
	st := c.podStripe(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.m[key]
	return e.at, ok && e.id == id
}

// rememberPod records at as the first sight of the pod key with identity
// id, unless a concurrent call recorded that pod first.
func (c *Countdowns) rememberPod(key, id uint64, at int64) {
	st := c.podStripe(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.m[key]
	if ok && e.id == id {
		return
	}
	if !ok {
		c.podCount.Add(1)
	}
	st.m[key] = podSeen{id: id, at: at}
	st.peak = max(st.peak, len(st.m))
}

func (c *Countdowns) forgetPod(key uint64) {
	st := c.podStripe(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.m[key]; !ok {
		return
	}
	delete(st.m, key)
	c.podCount.Add(-1)
	st.m = rebuildIfShrunk(st.m, &st.peak)
}

// observeTaints returns the first sights of the NoExecute taints with no
// TimeAdded among taints, the node's: remembered, or now for a taint not
// seen before. Remembered taints no longer there are forgotten.
func (c *Countdowns) observeTaints(node string, taints []v1.Taint, now time.Time) []taintSeen {
	unknown := 0
	for i := range taints {
		if taints[i].Effect == v1.TaintEffectNoExecute && taints[i].TimeAdded == nil {
			unknown++
		}
	}
	if unknown == 0 && c.nodeCount.Load() == 0 {
		return nil
	}
	st := &c.nodes[maphash.String(c.seed, node)%stripes]
	st.mu.Lock()
	defer st.mu.Unlock()
	if unknown == 0 {
		c.forgetNodeLocked(st, node)
		return nil
	}
	old := st.m[node]
	same := len(old) == unknown
	for i := 0; same && i < len(taints); i++ {
		t := &taints[i]
		same = t.Effect != v1.TaintEffectNoExecute || t.TimeAdded != nil || findTaint(old, t.Key) >= 0
	}
	if same {
		return old // the common case: nothing new, nothing gone
	}
	seen := make([]taintSeen, 0, unknown)
	for i := range taints {
		t := &taints[i]
		if t.Effect != v1.TaintEffectNoExecute || t.TimeAdded != nil {
			continue
		}
		at := now
		if j := findTaint(old, t.Key); j >= 0 {
			at = old[j].at
		}
		seen = append(seen, taintSeen{key: t.Key, at: at})
	}
	if old == nil {
		c.nodeCount.Add(1)
	}
	st.m[node] = seen
	st.peak = max(st.peak, len(st.m))
	return seen
}

// rememberedTaints returns the remembered first sights of node's taints.
func (c *Countdowns) rememberedTaints(node string) []taintSeen {
	if c.nodeCount.Load() == 0 {
		return nil
	}
	st := &c.nodes[maphash.String(c.seed, node)%stripes]
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.m[node]
}

func (c *Countdowns) forgetNodeLocked(st *nodeStripe, node string) {
	if _, ok := st.m[node]; !ok {
		return
	}
	delete(st.m, node)
	c.nodeCount.Add(-1)
	st.m = rebuildIfShrunk(st.m, &st.peak)
}

// findTaint returns the index of the taint with key in seen, or -1.
func findTaint(seen []taintSeen, key string) int {
	for i := range seen {
		if seen[i].key == key {
			return i
		}
	}
	return -1
}

// rebuildAt is the smallest peak size after which a map that has shrunk to
// a quarter of its peak is rebuilt: Go maps never give memory back. Copying
// the quarter that is left costs less than the deletions that shrank it, so
// rebuilds are amortised O(1) per deletion, and a size hovering around a
// quarter of the peak rebuilds once, not at every step (the rebuilt map's
// peak is its size).
const rebuildAt = 256

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
