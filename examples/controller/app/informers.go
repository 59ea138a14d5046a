package app

import (
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/taintkit/taintkit/examples/controller/podcache"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/tolerations"
)

// nodeNameIndex is the name of the pod informer's index on spec.nodeName.
const nodeNameIndex = "spec.nodeName"

// cluster is the controller's view of the cluster: shared informers for
// nodes and pods, and the lookups the manager needs.
type cluster struct {
	factory    informers.SharedInformerFactory
	nodes      cache.SharedIndexInformer
	pods       cache.SharedIndexInformer
	nodeLister corelisters.NodeLister
	// devices is the view of DRA devices, with --device-taints; nil
	// without.
	devices *devices
	// countdowns remembers what the objects do not say (first sights, the
	// earliest TimeAdded of a taint refreshed in place, the deadlines a
	// leader keeps), fed by the informers from their start, whether this
	// replica leads or stands by, and shared by every manager it runs.
	countdowns *tolerations.Countdowns
}

// newCluster sets up the informers, and with o.DeviceTaints those of DRA
// devices ([devices]).
func newCluster(client kubernetes.Interface, o Options, log logr.Logger) (*cluster, error) {
	// No resync: the manager is level-triggered on changes, and a resync
	// would only re-queue every pod for nothing.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(trim))
	nodes := factory.Core().V1().Nodes()
	pods := factory.Core().V1().Pods()
	if err := pods.Informer().AddIndexers(cache.Indexers{nodeNameIndex: podNodeName}); err != nil {
		return nil, fmt.Errorf("app: add pod index: %w", err)
	}
	c := &cluster{
		factory:    factory,
		nodes:      nodes.Informer(),
		pods:       pods.Informer(),
		nodeLister: nodes.Lister(),
		countdowns: tolerations.NewCountdowns(nil, tolerations.Matcher{}),
	}
	// The countdowns are fed from the informers' start, standing by too.
	if _, err := c.nodes.AddEventHandler(c.observeNodes(log)); err != nil {
		return nil, fmt.Errorf("app: add node handler: %w", err)
	}
	if _, err := c.pods.AddEventHandler(c.observePods(log)); err != nil {
		return nil, fmt.Errorf("app: add pod handler: %w", err)
	}
	if o.DeviceTaints {
		if err := c.addDevices(o.DeviceTaintRuleMaxPods, log); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// observeNodes returns the node handler that feeds c.countdowns: a node's
// pods are observed again when its NoExecute taints change, so that their
// deadlines are remembered as the leader decides them.
func (c *cluster) observeNodes(log logr.Logger) cache.ResourceEventHandler {
	return eventHandler(func(old, node *v1.Node) {
		if node == nil {
			c.countdowns.ForgetNode(old.Name)
			return
		}
		if !c.countdowns.ObserveNode(node) {
			return
		}
		objs, err := c.pods.GetIndexer().ByIndex(nodeNameIndex, node.Name)
		if err != nil {
			log.Error(err, "Listing a node's pods for the countdowns", "node", node.Name)
			return
		}
		for _, obj := range objs {
			if pod, ok := object[*v1.Pod](obj); ok {
				c.countdowns.ObservePod(pod)
			}
		}
	}, log)
}

// observePods returns the pod handler that feeds c.countdowns.
func (c *cluster) observePods(log logr.Logger) cache.ResourceEventHandler {
	pods := eventHandler(func(old, pod *v1.Pod) {
		if pod == nil {
			c.countdowns.ObservePodDeleted(old)
			return
		}
		c.countdowns.ObservePod(pod)
	}, log)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if !c.nothingToObserve(obj) {
				pods.OnAdd(obj, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if !c.nothingToObserve(newObj) {
				pods.OnUpdate(oldObj, newObj)
			}
		},
		DeleteFunc: func(obj any) {
			if remembered, _ := c.countdowns.Len(); remembered != 0 {
				pods.OnDelete(obj)
			}
		},
	}
}

// nothingToObserve reports whether the countdowns have nothing to remember
// of, or forget about, the pod a record holds, so that the record need not
// be turned back into a pod: they remember no taint and no pod, and the
// pod is bound with a PodScheduled time or not bound at all (then
// ObservePod would return at once). A cluster with no NoExecute taint, at
// start-up most of all, costs no pod per event.
func (c *cluster) nothingToObserve(obj any) bool {
	r, ok := obj.(*podcache.Record)
	if !ok {
		return false
	}
	if pods, nodes := c.countdowns.Len(); pods != 0 || nodes != 0 {
		return false
	}
	_, scheduled := r.BoundAt()
	return scheduled || r.NodeName() == ""
}

// trim is the informers' transform: a pod is cached as a podcache.Record
// (what the manager, its events, its pod client, the device view and
// /debug/evictions read: identity, node, tolerations, conditions, claims,
// PodGroup, in a fifth of a trimmed *v1.Pod's memory), other objects
// without their managedFields. The handlers and reads below turn records
// back into pods (object).
func trim(obj any) (any, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		return podcache.NewRecord(pod), nil
	}
	return stripManagedFields(obj)
}

// stripManagedFields drops an object's managedFields before it is cached:
// the manager never reads them. Of ResourceSlices and ResourceClaims it keeps
// only what the controller reads (trimDeviceObjects).
func stripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
	}
	trimDeviceObjects(obj)
	return obj, nil
}

func podNodeName(obj any) ([]string, error) {
	var node string
	switch pod := obj.(type) {
	case *podcache.Record:
		node = pod.NodeName()
	case *v1.Pod:
		node = pod.Spec.NodeName
	}
	if node == "" {
		return nil, nil
	}
	return []string{node}, nil
}

// podGroupKey indexes a pod by its namespace and PodGroup name
// (podGroupIndex); a pod in no PodGroup has no key.
func podGroupKey(obj any) ([]string, error) {
	var namespace, group string
	switch pod := obj.(type) {
	case *podcache.Record:
		namespace, group = pod.Namespace(), pod.PodGroupName()
	case *v1.Pod:
		if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
			namespace, group = pod.Namespace, *g.PodGroupName
		}
	}
	if group == "" {
		return nil, nil
	}
	return []string{namespace + "/" + group}, nil
}

// podGroupPods returns the pods of the PodGroup namespace/name, from the
// pod informer's podGroupIndex.
func (c *cluster) podGroupPods(namespace, name string) []*v1.Pod {
	objs, err := c.pods.GetIndexer().ByIndex(podGroupIndex, namespace+"/"+name)
	if err != nil {
		return nil // no such index: not with --device-taints
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := object[*v1.Pod](obj); ok {
			pods = append(pods, pod)
		}
	}
	return pods
}

// getNode, getPod and podsOnNode are the manager's reads: from the
// informers' caches.
func (c *cluster) getNode(name string) (*v1.Node, error) { return c.nodeLister.Get(name) }

func (c *cluster) listNodes() ([]*v1.Node, error) { return c.nodeLister.List(labels.Everything()) }

func (c *cluster) getPod(namespace, name string) (*v1.Pod, error) {
	obj, exists, err := c.pods.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	pod, ok := object[*v1.Pod](obj)
	if !exists || !ok {
		return nil, apierrors.NewNotFound(v1.Resource("pod"), name)
	}
	return pod, nil
}

func (c *cluster) podsOnNode(name string) ([]*v1.Pod, error) {
	objs, err := c.pods.GetIndexer().ByIndex(nodeNameIndex, name)
	if err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := object[*v1.Pod](obj); ok {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// updates is where the informers' events go: a *manager.Manager.
type updates interface {
	NodeUpdated(old, new *v1.Node)
	PodUpdated(old, new *v1.Pod)
	PodChanged(p manager.PodRef, deleted bool)
}

// nodeHandler turns node events into NodeUpdated calls.
func nodeHandler(u updates, log logr.Logger) cache.ResourceEventHandler {
	return eventHandler(u.NodeUpdated, log)
}

// podHandler turns pod events into the manager's calls. The records the
// informer caches are named to it (PodChanged) without being turned back
// into pods, and an update that changes none of what a decision reads
// (SameTaintInputs) is dropped here; the manager reads the pod when it
// decides, if it has to. Pods, and records that hold resource claims (whose
// updates the manager compares), go to PodUpdated.
func podHandler(u updates, log logr.Logger) cache.ResourceEventHandler {
	pods := eventHandler(u.PodUpdated, log)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if r, ok := obj.(*podcache.Record); ok {
				u.PodChanged(podRef(r), false)
				return
			}
			pods.OnAdd(obj, false)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*podcache.Record)
			r, ok2 := newObj.(*podcache.Record)
			switch {
			case ok1 && ok2 && old.SameTaintInputs(r):
			case ok1 && ok2 && !old.HasClaims() && !r.HasClaims():
				u.PodChanged(podRef(r), false)
			default:
				pods.OnUpdate(oldObj, newObj)
			}
		},
		DeleteFunc: func(obj any) {
			last := obj
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				last = tomb.Obj // the last state the cache knew
			}
			if r, ok := last.(*podcache.Record); ok {
				u.PodChanged(podRef(r), true)
				return
			}
			pods.OnDelete(obj)
		},
	}
}

func podRef(r *podcache.Record) manager.PodRef {
	return manager.PodRef{Namespace: r.Namespace(), Name: r.Name(), NodeName: r.NodeName(), UID: r.UID()}
}

// eventHandler turns an informer's events into calls of update: old is nil
// (T's zero value) for an addition, new is nil for a deletion.
func eventHandler[T any](update func(old, new T), log logr.Logger) cache.ResourceEventHandler {
	var none T
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := object[T](obj); ok {
				update(none, o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := object[T](oldObj)
			o, ok2 := object[T](newObj)
			if ok1 && ok2 {
				update(old, o)
			}
		},
		DeleteFunc: func(obj any) {
			if o, ok := deleted[T](obj, log); ok {
				update(o, none)
			}
		},
	}
}

// deleted returns the object of a delete event. When the informer missed
// the deletion (its watch broke and the relist no longer had the object)
// the event carries a cache.DeletedFinalStateUnknown holding the last state
// the cache knew, which is as good for the manager: it only needs the
// object's name, namespace, node and (for a pod) UID.
func deleted[T any](obj any, log logr.Logger) (T, bool) {
	if t, ok := object[T](obj); ok {
		return t, true
	}
	var zero T
	tomb, ok := obj.(cache.DeletedFinalStateUnknown)
	if !ok {
		log.Error(nil, "Unexpected object in a delete event", "type", fmt.Sprintf("%T", obj))
		return zero, false
	}
	t, ok := object[T](tomb.Obj)
	if !ok {
		log.Error(nil, "Unexpected object in a tombstone", "key", tomb.Key, "type", fmt.Sprintf("%T", tomb.Obj))
		return zero, false
	}
	return t, true
}

// object returns obj as a T: itself, or for a T of *v1.Pod the pod a cached
// podcache.Record holds.
func object[T any](obj any) (T, bool) {
	if r, ok := obj.(*podcache.Record); ok {
		obj = r.Pod()
	}
	t, ok := obj.(T)
	return t, ok
}
