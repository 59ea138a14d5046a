package tolerations

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/internal/mapshrink"
)

// Countdowns decides as [Matcher.Decide] does, from a memory of what the
// objects do not say, so that deciding again gives the same deadline and the
// eviction comes. It remembers:
//
//   - each NoExecute taint's start: the first sight of one with no
//     TimeAdded, or the earliest TimeAdded of one refreshed in place (the
//     same key and effect), until an update of its node no longer has it;
//   - a pod's first sight on its node (by UID) if it has no PodScheduled time;
//   - each pod's deadline, which moves later only when the taint whose
//     countdown it ends leaves the node or the pod is another (a new UID, or
//     another node), as Kubernetes keeps its first schedule; a shorter
//     toleration or a stricter taint brings it earlier.
//
// Feed it every node and pod event (the Observe methods, ForgetNode) from
// the informers' start, on every replica, leading or not: a standby that
// takes over then decides the old leader's deadlines, give or take an
// informer's delivery. The replica that acts decides with
// [Countdowns.Decide], which observes too.
//
// It is safe for concurrent use by multiple goroutines. It keeps a few words
// per node with a NoExecute taint and 40 bytes per pod with a countdown or no
// PodScheduled time, given back as they are forgotten. The zero value is not
// usable; call [NewCountdowns].
type Countdowns struct {
	clock   clock.PassiveClock
	matcher Matcher
	seed    maphash.Seed

	pods  [stripes]podStripe
	nodes [stripes]nodeStripe
	// podCount and nodeCount are the entries of all stripes: at zero, a
	// call that needs nothing remembered takes no lock.
	podCount, nodeCount atomic.Int64
}

// stripes is how many maps, each under its own mutex, the pods (and the
// nodes) are split into by hash, so that goroutines deciding for different
// pods seldom wait for each other.
const stripes = 32

// shrinkPolicy is when a stripe's map is rebuilt to fit (Go maps never give
// memory back): once down to a quarter of a peak of at least 256 entries, or
// empty after a peak of more than one group of slots, so that forgotten pods
// and nodes give their memory back.
var shrinkPolicy = mapshrink.Policy{MinPeak: 256, FreeEmpty: true}

// podStripe holds the pods whose key hashes to it.
type podStripe struct {
	mu   sync.Mutex
	m    map[uint64]podMemory // by podKey
	peak int
	_    [40]byte // keep stripes' mutexes off each other's cache lines
}

// podMemory is what is remembered of a pod. With the key's hash for a key,
// a map slot takes 40 bytes; two keys, or two pods under one key, collide
// with probability 2⁻⁶⁴, and then one pod counts from the other's memory.
type podMemory struct {
	id    uint64 // podID of the pod's UID and node
	seen  int64  // first sight on the node in Unix nanoseconds; 0: it has a PodScheduled time
	taint uint64 // taintID of the taint whose countdown ends at at
	at    int64  // the pod's deadline in Unix nanoseconds; 0: none
}

// nodeStripe holds the nodes whose name hashes to it.
type nodeStripe struct {
	mu   sync.Mutex
	m    map[string][]v1.Taint // never modified once stored: readers use it unlocked
	peak int
	_    [40]byte
}

// NewCountdowns returns a Countdowns that matches as m does and reads the
// time from clk (nil means [clock.RealClock]).
func NewCountdowns(clk clock.PassiveClock, m Matcher) *Countdowns {
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Countdowns{clock: clk, matcher: m, seed: maphash.MakeSeed()}
	for i := range stripes {
		c.pods[i].m = make(map[uint64]podMemory)
		c.nodes[i].m = make(map[string][]v1.Taint)
	}
	return c
}

// ObserveNode records the starts of node's NoExecute taints not seen before,
// keeps the earlier start of those seen before, and forgets those gone; call
// it on every add and update of a node. When it reports that they changed
// (it allocates only then), observe each pod on the node again.
func (c *Countdowns) ObserveNode(node *v1.Node) (changed bool) {
	if node == nil {
		return false
	}
	now := c.clock.Now()
	if now.IsZero() {
		return false
	}
	_, changed = c.observeNode(node, now)
	return changed
}

// ObservePod records pod's first sight on its node if it has no PodScheduled
// time, and its deadline as [Countdowns.Decide] would; a pod with no node is
// forgotten. Call it on every add and update of a pod; it does not allocate.
func (c *Countdowns) ObservePod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	if pod.Spec.NodeName == "" {
		c.ForgetPod(pod.Namespace, pod.Name)
		return
	}
	now := c.clock.Now()
	if now.IsZero() {
		return
	}
	taints := c.rememberedTaints(pod.Spec.NodeName)
	if len(taints) == 0 && c.podCount.Load() == 0 {
		if _, scheduled := PodBoundAt(pod); scheduled {
			return // the common case: nothing to remember, nothing to forget
		}
	}
	c.decideFromMemory(pod.Spec.NodeName, taints, nil, nil, pod, now, true)
}

// ObservePodDeleted forgets pod, unless what is remembered under its
// namespace and name is another pod's (a new UID). Call it on every delete
// of a pod.
func (c *Countdowns) ObservePodDeleted(pod *v1.Pod) {
	if pod == nil || c.podCount.Load() == 0 {
		return
	}
	key, id := c.podKey(pod.Namespace, pod.Name), c.podID(pod.UID, pod.Spec.NodeName)
	st := c.podStripe(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.m[key]; ok && e.id == id {
		c.forgetPodLocked(st, key)
	}
}

// Decide observes node and pod and decides for pod on node at the clock's
// now, as [Matcher.Decide] does with every start and deadline remembered
// (then without allocating). A nil node decides Never and forgets the pod.
func (c *Countdowns) Decide(node *v1.Node, pod *v1.Pod) Decision {
	if node == nil {
		if pod != nil && !c.clock.Now().IsZero() {
			c.ObservePodDeleted(pod)
		}
		return Decision{}
	}
	return c.DecideWithDevices(node, pod, nil)
}

// DecideWithDevices decides for pod as [Countdowns.Decide] does for its
// node's taints and as [DecideDevices] does for devices, those allocated to
// it, and returns the earlier ([Earliest]): one decision, so that neither
// cancels the other. A device taint counts from the pod's binding, or first
// sight, at the earliest. A nil node has no taints; the pod is not forgotten.
func (c *Countdowns) DecideWithDevices(node *v1.Node, pod *v1.Pod, devices []Device) Decision {
	if pod == nil {
		return Decision{}
	}
	now := c.clock.Now()
	if now.IsZero() {
		return Decision{} // as Matcher.Decide: refuse to evict, and keep what is remembered
	}
	if node == nil {
		return c.decideFromMemory(pod.Spec.NodeName, nil, nil, devices, pod, now, true)
	}
	remembered, _ := c.observeNode(node, now)
	return c.decideFromMemory(node.Name, node.Spec.Taints, remembered, devices, pod, now, true)
}

// Recheck decides as [Countdowns.Decide] does from what c remembers,
// recording and forgetting nothing (an unseen start counts as now), for an
// eviction that checks when it fires while newer updates are observed.
func (c *Countdowns) Recheck(node *v1.Node, pod *v1.Pod) Decision {
	if node == nil {
		return Decision{}
	}
	return c.RecheckWithDevices(node, pod, nil)
}

// RecheckWithDevices decides as [Countdowns.DecideWithDevices] does from what
// c remembers, recording and forgetting nothing, as [Countdowns.Recheck].
func (c *Countdowns) RecheckWithDevices(node *v1.Node, pod *v1.Pod, devices []Device) Decision {
	if pod == nil {
		return Decision{}
	}
	now := c.clock.Now()
	if now.IsZero() {
		return Decision{}
	}
	if node == nil {
		return c.decideFromMemory(pod.Spec.NodeName, nil, nil, devices, pod, now, false)
	}
	return c.decideFromMemory(node.Name, node.Spec.Taints, c.rememberedTaints(node.Name), devices, pod, now, false)
}

// ForgetPod forgets the pod named namespace/name, whichever pod it is;
// [Countdowns.ObservePodDeleted] is the safer call for a delete event, as it
// keeps a newer pod's memory.
func (c *Countdowns) ForgetPod(namespace, name string) {
	if c.podCount.Load() == 0 {
		return
	}
	key := c.podKey(namespace, name)
	st := c.podStripe(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	c.forgetPodLocked(st, key)
}

// ForgetNode forgets the taints of the node named name; call it when the
// node is deleted. A node created again under the name counts its taints
// from their first sight on it.
func (c *Countdowns) ForgetNode(name string) {
	if c.nodeCount.Load() == 0 {
		return
	}
	st := c.nodeStripe(name)
	st.mu.Lock()
	defer st.mu.Unlock()
	c.forgetNodeLocked(st, name)
}

// Len returns how many pods and nodes c remembers something of.
func (c *Countdowns) Len() (pods, nodes int) {
	return int(c.podCount.Load()), int(c.nodeCount.Load())
}

// decideFromMemory decides for pod on the node named node, whose taints are
// taints and whose NoExecute taints' starts are in remembered (nil: taints'
// TimeAdded are the starts), as the Matcher's rule does
// ([Matcher.decideFromStarts]) with what c remembers of the pod: its first
// sight if it has no PodScheduled time, and its deadline, which the rule for
// moving a deadline holds ([Countdowns.holdDeadline]). The pod's devices
// decide too, from the same binding; the rule for moving a deadline applies
// to node taints only (a device taint's start and a device's tolerations,
// fixed at allocation, already fix its deadline). With record, it records
// what it decided, or forgets the pod if there is nothing to remember.
//
// The pod's memory is read and written under its stripe's lock, so that
// concurrent observers never lose each other's writes; with nothing
// remembered and nothing to record, it takes no lock.
func (c *Countdowns) decideFromMemory(node string, taints, remembered []v1.Taint, devices []Device, pod *v1.Pod, now time.Time, record bool) Decision {
	var (
		st       *podStripe
		key      uint64
		old, mem podMemory
		ok       bool // something, old, is remembered under the pod's name
	)
	if record || c.podCount.Load() != 0 {
		key = c.podKey(pod.Namespace, pod.Name)
		st = c.podStripe(key)
		st.mu.Lock()
		defer st.mu.Unlock()
		old, ok = st.m[key]
		mem = old
		if id := c.podID(pod.UID, node); !ok || mem.id != id {
			mem = podMemory{id: id} // another pod's memory (or that of this pod on another node) does not count
		}
	}

	boundAt, scheduled := PodBoundAt(pod)
	switch {
	case scheduled:
		mem.seen = 0
	case mem.seen != 0:
		boundAt = time.Unix(0, mem.seen).In(now.Location())
	default:
		mem.seen = now.UnixNano() // its first sight
	}
	d, due := c.matcher.decideFromStarts(taints, pod.Spec.Tolerations, boundAt, now, remembered)
	d, mem = c.holdDeadline(d, due, mem, taints, remembered, now)
	if len(devices) > 0 {
		d = Earliest(d, DecideDevices(devices, boundAt, now))
	}

	if !record || ok && mem == old {
		return d // the common case: decided again, nothing new to remember
	}
	if mem.seen == 0 && mem.at == 0 {
		if ok {
			c.forgetPodLocked(st, key)
		}
		return d
	}
	if !ok {
		c.podCount.Add(1)
	}
	st.m[key] = mem
	st.peak = max(st.peak, len(st.m))
	return d
}

// holdDeadline applies the rule for moving a deadline to d, decided from the
// node's taints, due being the index in taints of the taint whose countdown
// ends at d.At, and returns it with mem, the pod's memory, updated to the
// deadline that stands. A deadline moves later only when the taint whose
// countdown it ends leaves the node: an earlier deadline in mem stands while
// that taint is still there.
func (c *Countdowns) holdDeadline(d Decision, due int, mem podMemory, taints, remembered []v1.Taint, now time.Time) (Decision, podMemory) {
	if d.Action == Never {
		mem.taint, mem.at = 0, 0
		return d, mem
	}
	if mem.at != 0 && mem.at < d.At.UnixNano() {
		if i := c.findTaintID(taints, remembered, mem.taint); i >= 0 {
			// The earlier deadline ends the countdown of a taint still on
			// the node: it stands.
			d.At = time.Unix(0, mem.at).In(now.Location())
			if !d.Untolerated {
				d.Taint = taints[i]
			}
			if !d.At.After(now) {
				d.Action = EvictNow
			}
			return d, mem
		}
	}
	if at := d.At.UnixNano(); at != mem.at || mem.taint == 0 {
		mem.taint, mem.at = c.taintID(&taints[due], remembered), at
	}
	return d, mem
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

func (c *Countdowns) nodeStripe(name string) *nodeStripe {
	return &c.nodes[maphash.String(c.seed, name)%stripes]
}

func (c *Countdowns) forgetPodLocked(st *podStripe, key uint64) {
	if _, ok := st.m[key]; !ok {
		return
	}
	delete(st.m, key)
	c.podCount.Add(-1)
	st.m = mapshrink.Fit(shrinkPolicy, st.m, &st.peak)
}
