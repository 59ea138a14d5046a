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

// firstSights remembers when this replica first saw each countdown start
// the objects do not record: a NoExecute taint with no TimeAdded (by node,
// key and effect) and a pod on a node with no PodScheduled time (by UID and
// node). The informers' events feed it from the moment they start, whether
// the replica leads or stands by, and the manager reads nodes and pods
// through it with those times filled in. So a standby that takes over ends
// such a countdown when the old leader would have, give or take an
// informer's delivery, instead of counting it again from the takeover (the
// manager, which a standby does not run, remembers first sights only while
// it runs). A restarted process counts from its own first sight.
//
// It holds an entry only for such a taint or pod, forgotten when the taint
// leaves the node, the node or pod is deleted, or the pod gets a
// PodScheduled time. It is safe for concurrent use by multiple goroutines.
type firstSights struct {
	mu     sync.Mutex
	taints map[string][]taintSight // by node name
	pods   map[types.UID]podSight
}

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

// sawNode records the node's untimed taints not seen yet and forgets those
// gone, and returns the node's sights; the caller holds f.mu.
func (f *firstSights) sawNodeLocked(node *v1.Node, now metav1.Time) []taintSight {
	old := f.taints[node.Name]
	var cur []taintSight
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if !untimed(t) {
			continue
		}
		s := taintSight{key: t.Key, effect: t.Effect, at: now}
		if j := slices.IndexFunc(old, func(o taintSight) bool { return o.key == t.Key && o.effect == t.Effect }); j >= 0 {
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

// node returns node, or, if it has untimed NoExecute taints, a copy whose
// taints have their first sights as TimeAdded.
func (f *firstSights) node(node *v1.Node) *v1.Node {
	if !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return untimed(&t) }) {
		return node
	}
	f.mu.Lock()
	sights := f.sawNodeLocked(node, metav1.Now()) // the cache may be ahead of the events
	f.mu.Unlock()
	cp := *node
	cp.Spec.Taints = slices.Clone(node.Spec.Taints)
	for i := range cp.Spec.Taints {
		t := &cp.Spec.Taints[i]
		if !untimed(t) {
			continue
		}
		for _, s := range sights {
			if s.key == t.Key && s.effect == t.Effect {
				at := s.at
				t.TimeAdded = &at
			}
		}
	}
	return &cp
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
