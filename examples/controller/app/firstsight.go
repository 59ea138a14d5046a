package app

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// firstSights remembers, for the countdowns of NoExecute taints and of
// pods, the starts a replica learns only by watching: when it first saw a
// NoExecute taint with no TimeAdded (by node, key and effect), the earliest
// TimeAdded of a taint refreshed in place (the same key and effect, a later
// TimeAdded: it never left the node, so the deadline counted from its first
// TimeAdded stands, as the manager's rule for moving deadlines says), and
// when it first saw a pod on a node with no PodScheduled time (by UID and
// node). The informers' events feed it from the moment they start, whether
// the replica leads or stands by, and the manager reads nodes and pods
// through it with those times filled in. So a standby that takes over ends
// such a countdown when the old leader would have, give or take an
// informer's delivery, instead of counting it again from the takeover or
// from the refreshed TimeAdded (the manager, which a standby does not run,
// remembers only while it runs). A restarted process counts from what it
// sees from its own start.
//
// It holds an entry only for a NoExecute taint or such a pod, forgotten
// when the taint leaves the node, the node or pod is deleted, or the pod
// gets a PodScheduled time. It is safe for concurrent use by multiple
// goroutines.
type firstSights struct {
	mu     sync.Mutex
	taints map[string][]taintSight // by node name
	pods   map[types.UID]podSight
}

// taintSight is a NoExecute taint's countdown start: its first sight if it
// has no TimeAdded, or the earliest TimeAdded seen while it stayed.
type taintSight struct {
	key    string
	effect v1.TaintEffect
	at     metav1.Time
}

type podSight struct {
	node string
	at   metav1.Time
}

func newFirstSights() *firstSights {
	return &firstSights{taints: map[string][]taintSight{}, pods: map[types.UID]podSight{}}
}

// untimed reports whether t is a NoExecute taint with no TimeAdded.
func untimed(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoExecute && (t.TimeAdded == nil || t.TimeAdded.IsZero())
}

// unscheduled reports whether the pod is on a node and has no PodScheduled
// time, as tolerations.PodBoundAt reads it.
func unscheduled(pod *v1.Pod) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodScheduled {
			return c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero()
		}
	}
	return true
}

// start is when the countdown of t, a NoExecute taint, started as far as
// its object says: its TimeAdded, or now, the first sight, if it has none.
func start(t *v1.Taint, now metav1.Time) metav1.Time {
	if untimed(t) {
		return now
	}
	return *t.TimeAdded
}

// findSight returns the index of t's sight in sights (by key and effect),
// or -1.
func findSight(sights []taintSight, t *v1.Taint) int {
	return slices.IndexFunc(sights, func(s taintSight) bool { return s.key == t.Key && s.effect == t.Effect })
}

// sawNodeLocked records the starts of the node's NoExecute taints not seen
// yet, keeps the earlier start of a taint seen before (a taint refreshed in
// place keeps its first TimeAdded) and forgets those gone, and returns the
// node's sights; the caller holds f.mu.
func (f *firstSights) sawNodeLocked(node *v1.Node, now metav1.Time) []taintSight {
	old := f.taints[node.Name]
	n, same := 0, true
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		n++
		j := findSight(old, t)
		same = same && j >= 0 && !start(t, now).Time.Before(old[j].at.Time)
	}
	if same && n == len(old) {
		return old // the common case: nothing new, nothing gone, nothing earlier
	}
	var cur []taintSight
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		s := taintSight{key: t.Key, effect: t.Effect, at: start(t, now)}
		if j := findSight(old, t); j >= 0 && old[j].at.Before(&s.at) {
			s.at = old[j].at
		}
		cur = append(cur, s)
	}
	if len(cur) == 0 {
		delete(f.taints, node.Name)
	} else {
		f.taints[node.Name] = cur
	}
	return cur
}

func (f *firstSights) sawNode(node *v1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sawNodeLocked(node, metav1.Now())
}

func (f *firstSights) nodeDeleted(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.taints, name)
}

// sawPodLocked records the pod's first sight on its node if it is
// unscheduled and not seen there yet, forgets it otherwise, and returns
// the sight; the caller holds f.mu.
func (f *firstSights) sawPodLocked(pod *v1.Pod, now metav1.Time) (podSight, bool) {
	if !unscheduled(pod) {
		delete(f.pods, pod.UID)
		return podSight{}, false
	}
	s, ok := f.pods[pod.UID]
	if !ok || s.node != pod.Spec.NodeName {
		s = podSight{node: pod.Spec.NodeName, at: now}
		f.pods[pod.UID] = s
	}
	return s, true
}

func (f *firstSights) sawPod(pod *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sawPodLocked(pod, metav1.Now())
}

func (f *firstSights) podDeleted(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, uid)
}

// node returns node, or, if it has a NoExecute taint with no TimeAdded or
// one refreshed in place, a copy whose taints have their starts (see
// firstSights) as TimeAdded.
func (f *firstSights) node(node *v1.Node) *v1.Node {
	if !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }) {
		return node
	}
	f.mu.Lock()
	sights := f.sawNodeLocked(node, metav1.Now()) // the cache may be ahead of the events
	f.mu.Unlock()
	var cp *v1.Node
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		j := findSight(sights, t)
		if j < 0 || !untimed(t) && !sights[j].at.Before(t.TimeAdded) {
			continue // as the object says
		}
		if cp == nil {
			c := *node
			c.Spec.Taints = slices.Clone(node.Spec.Taints)
			cp = &c
		}
		at := sights[j].at
		cp.Spec.Taints[i].TimeAdded = &at
	}
	if cp == nil {
		return node
	}
	return cp
}

// pod returns pod, or, if it is unscheduled, a copy with a PodScheduled
// condition whose time is its first sight on its node.
func (f *firstSights) pod(pod *v1.Pod) *v1.Pod {
	if !unscheduled(pod) {
		return pod
	}
	f.mu.Lock()
	s, _ := f.sawPodLocked(pod, metav1.Now())
	f.mu.Unlock()
	cp := *pod
	cp.Status.Conditions = slices.DeleteFunc(slices.Clone(pod.Status.Conditions), func(c v1.PodCondition) bool {
		return c.Type == v1.PodScheduled
	})
	cp.Status.Conditions = append(cp.Status.Conditions, v1.PodCondition{
		Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: s.at,
		Reason: "FirstSeenOnNode", Message: "no PodScheduled time: counted from when this replica first saw the pod on its node",
	})
	return &cp
}

// handlers returns the informers' handlers that feed f.
func (f *firstSights) handlers(log logr.Logger) (nodes, pods cache.ResourceEventHandler) {
	nodes = cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				f.sawNode(n)
			}
		},
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*v1.Node); ok {
				f.sawNode(n)
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := deleted[*v1.Node](obj, log); ok {
				f.nodeDeleted(n.Name)
			}
		},
	}
	pods = cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*v1.Pod); ok {
				f.sawPod(p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*v1.Pod); ok {
				f.sawPod(p)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := deleted[*v1.Pod](obj, log); ok {
				f.podDeleted(p.UID)
			}
		},
	}
	return nodes, pods
}
