package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// NodeHandler is called after a node changes: old is nil when the node was
// added, new is nil when it was deleted. Both are read-only.
type NodeHandler func(old, new *v1.Node)

// PodHandler is called after a pod changes: old is nil when the pod was
// added, new is nil when it was removed. Both are read-only.
type PodHandler func(old, new *v1.Pod)

// Stats counts what happened to pods through [Cluster.DeletePod] and
// [Cluster.EvictPod]. The outcome counters (Deleted to Throttled) count calls
// of both.
type Stats struct {
	DeleteCalls int // calls to DeletePod, whatever their outcome
	EvictCalls  int // calls to EvictPod, whatever their outcome
	Deleted     int // pods removed
	Terminating int // pods marked terminating (positive grace period)
	NotFound    int // calls that found no pod
	Conflicts   int // calls whose UID precondition did not match
	Injected    int // calls failed by FailDeletes
	Throttled   int // calls failed by ThrottleDeletes
	Evicted     int // evictions allowed (the pod is then counted as Deleted or Terminating too, unless it already was terminating)
	Refused     int // evictions a PodDisruptionBudget refused
}

// Cluster is an in-memory set of nodes and pods. It is safe for concurrent use
// by multiple goroutines. The zero value is not usable; call [New].
type Cluster struct {
	clock clock.PassiveClock

	// writeMu serialises writes together with their notifications, so that
	// handlers see changes one at a time and in order, while readers (and
	// handlers, which read) only ever take mu.
	writeMu sync.Mutex

	mu        sync.RWMutex
	nodes     map[string]*v1.Node
	pods      map[types.NamespacedName]*v1.Pod
	byNode    map[string]map[types.NamespacedName]*v1.Pod
	uids      uint64
	failures  map[types.NamespacedName]int
	throttles map[types.NamespacedName]int
	pdbs      map[types.NamespacedName]*budget
	stats     Stats
	onNode    []NodeHandler
	onPod     []PodHandler
}

// New returns an empty cluster whose timestamps come from clk; a nil clk
// means [clock.RealClock].
func New(clk clock.PassiveClock) *Cluster {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Cluster{
		clock:     clk,
		nodes:     make(map[string]*v1.Node),
		pods:      make(map[types.NamespacedName]*v1.Pod),
		byNode:    make(map[string]map[types.NamespacedName]*v1.Pod),
		failures:  make(map[types.NamespacedName]int),
		throttles: make(map[types.NamespacedName]int),
		pdbs:      make(map[types.NamespacedName]*budget),
	}
}

// OnNode registers h to be called after every node change. Register handlers
// before making changes: changes made earlier are not replayed.
func (c *Cluster) OnNode(h NodeHandler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onNode = append(c.onNode, h)
}

// OnPod registers h to be called after every pod change. Register handlers
// before making changes: changes made earlier are not replayed.
func (c *Cluster) OnPod(h PodHandler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onPod = append(c.onPod, h)
}

func (c *Cluster) notifyNode(old, new *v1.Node) {
	c.mu.RLock()
	hs := c.onNode
	c.mu.RUnlock()
	for _, h := range hs {
		h(old, new)
	}
}

func (c *Cluster) notifyPod(old, new *v1.Pod) {
	c.mu.RLock()
	hs := c.onPod
	c.mu.RUnlock()
	for _, h := range hs {
		h(old, new)
	}
}

func (c *Cluster) now() metav1.Time { return metav1.NewTime(c.clock.Now()) }

// ---- nodes ----

// AddNode stores a copy of node. It fails with an AlreadyExists error if a
// node of that name exists.
func (c *Cluster) AddNode(node *v1.Node) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	n := node.DeepCopy()
	c.mu.Lock()
	if _, ok := c.nodes[n.Name]; ok {
		c.mu.Unlock()
		return apierrors.NewAlreadyExists(v1.Resource("nodes"), n.Name)
	}
	if n.CreationTimestamp.IsZero() {
		n.CreationTimestamp = c.now()
	}
	c.nodes[n.Name] = n
	c.mu.Unlock()
	c.notifyNode(nil, n)
	return nil
}

// UpdateNode replaces the stored node of the same name with a copy of node.
// It fails with a NotFound error if there is none.
func (c *Cluster) UpdateNode(node *v1.Node) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	n := node.DeepCopy()
	c.mu.Lock()
	old, ok := c.nodes[n.Name]
	if !ok {
		c.mu.Unlock()
		return apierrors.NewNotFound(v1.Resource("nodes"), n.Name)
	}
	c.nodes[n.Name] = n
	c.mu.Unlock()
	c.notifyNode(old, n)
	return nil
}

// SetTaints replaces the taints of the named node. A NoExecute taint given
// without TimeAdded keeps the TimeAdded of the same taint (key, value, effect)
// already on the node, or gets the current time, as the node lifecycle
// controller stamps it. It fails with a NotFound error if there is no such
// node.
func (c *Cluster) SetTaints(name string, taints ...v1.Taint) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	old, ok := c.nodes[name]
	if !ok {
		c.mu.Unlock()
		return apierrors.NewNotFound(v1.Resource("nodes"), name)
	}
	n := old.DeepCopy()
	n.Spec.Taints = make([]v1.Taint, len(taints))
	now := c.now()
	for i, t := range taints {
		t = *t.DeepCopy()
		if t.Effect == v1.TaintEffectNoExecute && t.TimeAdded == nil {
			for _, o := range old.Spec.Taints {
				if o.MatchTaint(&t) && o.Value == t.Value && o.TimeAdded != nil {
					t.TimeAdded = o.TimeAdded.DeepCopy()
				}
			}
			if t.TimeAdded == nil {
				t.TimeAdded = now.DeepCopy()
			}
		}
		n.Spec.Taints[i] = t
	}
	c.nodes[name] = n
	c.mu.Unlock()
	c.notifyNode(old, n)
	return nil
}

// DeleteNode removes the named node. Its pods stay (in Kubernetes the pod
// garbage collector removes them later). It fails with a NotFound error if
// there is no such node.
func (c *Cluster) DeleteNode(name string) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	old, ok := c.nodes[name]
	if !ok {
		c.mu.Unlock()
		return apierrors.NewNotFound(v1.Resource("nodes"), name)
	}
	delete(c.nodes, name)
	c.mu.Unlock()
	c.notifyNode(old, nil)
	return nil
}

// GetNode returns the named node, or a NotFound error. The node is shared and
// must not be modified.
func (c *Cluster) GetNode(name string) (*v1.Node, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if n, ok := c.nodes[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("nodes"), name)
}

// ListNodes returns every node, sorted by name. The nodes are shared and must
// not be modified.
func (c *Cluster) ListNodes() []*v1.Node {
	c.mu.RLock()
	out := make([]*v1.Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b *v1.Node) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// ---- pods ----

func keyOf(p *v1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// setScheduled records that p was bound to p.Spec.NodeName at now.
func setScheduled(p *v1.Pod, now metav1.Time) {
	cond := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			p.Status.Conditions[i] = cond
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, cond)
}

func hasCondition(p *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// isReady reports whether p's Ready condition is True.
func isReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// setCondition sets cond on p, replacing a condition of the same type, and
// reports whether anything changed. LastTransitionTime is now unless the
// status stays the same.
func setCondition(p *v1.Pod, cond v1.PodCondition, now metav1.Time) bool {
	cond.LastTransitionTime = now
	for i := range p.Status.Conditions {
		cur := &p.Status.Conditions[i]
		if cur.Type != cond.Type {
			continue
		}
		if cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
			return false
		}
		if cur.Status == cond.Status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = cond
		return true
	}
	p.Status.Conditions = append(p.Status.Conditions, cond)
	return true
}

// put stores p, keeping the by-node index in step. c.mu must be held.
func (c *Cluster) put(old, p *v1.Pod) {
	k := keyOf(p)
	if old != nil && old.Spec.NodeName != "" {
		delete(c.byNode[old.Spec.NodeName], k)
		if len(c.byNode[old.Spec.NodeName]) == 0 {
			delete(c.byNode, old.Spec.NodeName)
		}
	}
	c.pods[k] = p
	if p.Spec.NodeName != "" {
		m := c.byNode[p.Spec.NodeName]
		if m == nil {
			m = make(map[types.NamespacedName]*v1.Pod)
			c.byNode[p.Spec.NodeName] = m
		}
		m[k] = p
	}
}

// remove deletes the stored pod at k. c.mu must be held.
func (c *Cluster) remove(k types.NamespacedName, old *v1.Pod) {
	delete(c.pods, k)
	if old.Spec.NodeName != "" {
		delete(c.byNode[old.Spec.NodeName], k)
		if len(c.byNode[old.Spec.NodeName]) == 0 {
			delete(c.byNode, old.Spec.NodeName)
		}
	}
	delete(c.failures, k)
	delete(c.throttles, k)
}

// AddPod stores a copy of pod and returns the stored pod. An empty namespace
// becomes "default"; an empty UID gets the next of uid-1, uid-2, …; an empty
// phase becomes Pending; a pod with a node name and no PodScheduled condition
// gets one stamped now. It fails with an AlreadyExists error if a pod of that
// namespace and name exists.
func (c *Cluster) AddPod(pod *v1.Pod) (*v1.Pod, error) {
	return c.addPod(pod, true)
}

// AddPodAsIs is [Cluster.AddPod] without the PodScheduled stamp: the pod's
// conditions are stored as given. It models a pod created with its node name
// already set (static pods' mirrors, DaemonSet pods of old, many test pods),
// which no scheduler binds, so nothing records when it arrived on its node.
func (c *Cluster) AddPodAsIs(pod *v1.Pod) (*v1.Pod, error) {
	return c.addPod(pod, false)
}

func (c *Cluster) addPod(pod *v1.Pod, stampScheduled bool) (*v1.Pod, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	p := pod.DeepCopy()
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	now := c.now()
	c.mu.Lock()
	if _, ok := c.pods[keyOf(p)]; ok {
		c.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(v1.Resource("pods"), p.Name)
	}
	if p.UID == "" {
		c.uids++
		p.UID = types.UID(fmt.Sprintf("uid-%d", c.uids))
	}
	if p.CreationTimestamp.IsZero() {
		p.CreationTimestamp = now
	}
	if p.Status.Phase == "" {
		p.Status.Phase = v1.PodPending // as the API server creates every pod
	}
	if stampScheduled && p.Spec.NodeName != "" && !hasCondition(p, v1.PodScheduled) {
		setScheduled(p, now)
	}
	c.put(nil, p)
	c.mu.Unlock()
	c.notifyPod(nil, p)
	return p, nil
}

// UpdatePod replaces the stored pod of the same namespace and name with a
// copy of pod and returns the stored pod. If pod.UID is set and differs from
// the stored pod's, it fails with a Conflict error; if there is no such pod,
// with a NotFound error. A changed, non-empty node name re-stamps the
// PodScheduled condition (the pod was bound again, now).
func (c *Cluster) UpdatePod(pod *v1.Pod) (*v1.Pod, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	p := pod.DeepCopy()
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	c.mu.Lock()
	old, ok := c.pods[keyOf(p)]
	if !ok {
		c.mu.Unlock()
		return nil, apierrors.NewNotFound(v1.Resource("pods"), p.Name)
	}
	if p.UID != "" && p.UID != old.UID {
		c.mu.Unlock()
		return nil, conflict(p.Name, p.UID, old.UID)
	}
	p.UID = old.UID
	if p.Spec.NodeName != "" && p.Spec.NodeName != old.Spec.NodeName {
		setScheduled(p, c.now())
	}
	c.put(old, p)
	c.mu.Unlock()
	c.notifyPod(old, p)
	return p, nil
}

// GetPod returns the pod namespace/name, or a NotFound error. The pod is
// shared and must not be modified.
func (c *Cluster) GetPod(namespace, name string) (*v1.Pod, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if p, ok := c.pods[types.NamespacedName{Namespace: namespace, Name: name}]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("pods"), name)
}

// PodsOnNode returns the pods bound to the named node, sorted by namespace and
// name; the node itself need not exist. It never fails; the error is there to
// match an informer indexer's signature. The pods are shared and must not be
// modified.
func (c *Cluster) PodsOnNode(nodeName string) ([]*v1.Pod, error) {
	c.mu.RLock()
	m := c.byNode[nodeName]
	out := make([]*v1.Pod, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	c.mu.RUnlock()
	slices.SortFunc(out, comparePods)
	return out, nil
}

// ListPods returns every pod, sorted by namespace and name. The pods are
// shared and must not be modified.
func (c *Cluster) ListPods() []*v1.Pod {
	c.mu.RLock()
	out := make([]*v1.Pod, 0, len(c.pods))
	for _, p := range c.pods {
		out = append(out, p)
	}
	c.mu.RUnlock()
	slices.SortFunc(out, comparePods)
	return out
}

// NumPods returns the number of pods stored, terminating ones included.
func (c *Cluster) NumPods() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pods)
}

func comparePods(a, b *v1.Pod) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func conflict(name string, want, got types.UID) error {
	return apierrors.NewConflict(v1.Resource("pods"), name,
		fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", want, got))
}

// FailDeletes makes the next n calls of [Cluster.DeletePod] or
// [Cluster.EvictPod] for the pod namespace/name fail with a
// ServiceUnavailable error, before any other check. The count is forgotten
// when the pod is removed.
func (c *Cluster) FailDeletes(namespace, name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures[types.NamespacedName{Namespace: namespace, Name: name}] = n
}

// ThrottleDeletes makes the next n calls of [Cluster.DeletePod] or
// [Cluster.EvictPod] for the pod namespace/name fail with a TooManyRequests
// (429) error that carries no DisruptionBudget cause, as API Priority and
// Fairness rejects a request, before any other check (failures injected by
// [Cluster.FailDeletes] included). It lets a test tell API throttling from a
// PodDisruptionBudget's refusal. The count is forgotten when the pod is
// removed.
func (c *Cluster) ThrottleDeletes(namespace, name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttles[types.NamespacedName{Namespace: namespace, Name: name}] = n
}

// injected uses up a failure injected for k, if any is left, and returns it.
// Throttling comes first: the server sheds load before any handler runs.
// c.mu must be held.
func (c *Cluster) injected(k types.NamespacedName, verb string) error {
	if n := c.throttles[k]; n > 0 {
		c.throttles[k] = n - 1
		c.stats.Throttled++
		// What client-go reports for a 429 from API Priority and Fairness.
		return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)
	}
	if n := c.failures[k]; n > 0 {
		c.failures[k] = n - 1
		c.stats.Injected++
		return apierrors.NewServiceUnavailable(fmt.Sprintf("cluster: injected failure %s pod %s", verb, k))
	}
	return nil
}

// Stats returns what DeletePod and EvictPod have done so far.
func (c *Cluster) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.stats
}

// DeletePod deletes the pod namespace/name, as a clientset's
// Pods(namespace).Delete does. If opts.Preconditions.UID is set and differs
// from the stored pod's UID, it fails with a Conflict error and deletes
// nothing. A positive opts.GracePeriodSeconds marks the pod terminating (sets
// DeletionTimestamp) instead of removing it; deleting a terminating pod again
// without a positive grace period removes it. It fails with a NotFound error if
// there is no such pod, with ctx.Err() if ctx is done, and with the errors
// injected by [Cluster.ThrottleDeletes] and [Cluster.FailDeletes] while they
// last.
func (c *Cluster) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.deletePod(ctx, namespace, name, opts, false)
}

// deletePod is DeletePod, or EvictPod if evict is set: the same checks and
// the same deletion, with the budget checked and the DisruptionTarget
// condition set in between for an eviction.
func (c *Cluster) deletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions, evict bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	k := types.NamespacedName{Namespace: namespace, Name: name}
	c.mu.Lock()
	old, err := c.checkDelete(k, opts, evict)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if evict {
		c.stats.Evicted++
		// Two writes, as on the API server: handlers see the condition,
		// then the deletion. writeMu, held throughout, keeps other writers
		// out in between.
		if p := markEvicted(old, c.now()); p != nil {
			c.put(old, p)
			c.mu.Unlock()
			c.notifyPod(old, p)
			c.mu.Lock()
			old = p
		}
	}
	p, changed := c.applyDelete(k, old, opts.GracePeriodSeconds)
	c.mu.Unlock()
	if changed {
		c.notifyPod(old, p)
	}
	return nil
}

// checkDelete makes the checks of DeletePod, or EvictPod if evict is set, in
// the API server's order (the budget's before the UID precondition), counts
// the call and how it failed, and returns the pod to delete. c.mu must be
// held.
func (c *Cluster) checkDelete(k types.NamespacedName, opts metav1.DeleteOptions, evict bool) (*v1.Pod, error) {
	verb := "deleting"
	if evict {
		c.stats.EvictCalls++
		verb = "evicting"
	} else {
		c.stats.DeleteCalls++
	}
	if err := c.injected(k, verb); err != nil {
		return nil, err
	}
	old, ok := c.pods[k]
	if !ok {
		c.stats.NotFound++
		return nil, apierrors.NewNotFound(v1.Resource("pods"), k.Name)
	}
	if evict {
		if err := c.admit(old); err != nil {
			return nil, err
		}
	}
	if pre := opts.Preconditions; pre != nil && pre.UID != nil && *pre.UID != old.UID {
		c.stats.Conflicts++
		return nil, conflict(old.Name, *pre.UID, old.UID)
	}
	return old, nil
}

// applyDelete deletes old, stored at k, once DeletePod's checks have passed,
// and returns the stored pod (nil if removed) and whether anything changed.
// c.mu must be held.
func (c *Cluster) applyDelete(k types.NamespacedName, old *v1.Pod, grace *int64) (*v1.Pod, bool) {
	if grace != nil && *grace > 0 {
		if old.DeletionTimestamp != nil {
			return old, false // already terminating: nothing changes
		}
		p := old.DeepCopy()
		now := c.now()
		p.DeletionTimestamp = &now
		p.DeletionGracePeriodSeconds = grace
		c.put(old, p)
		c.stats.Terminating++
		return p, true
	}
	c.remove(k, old)
	c.stats.Deleted++
	return nil, true
}

// SetPodCondition sets cond on the pod namespace/name, replacing a condition
// of the same type, as a status patch does. LastTransitionTime is stamped now
// when the status changes (or the condition is new). If uid is not empty and
// differs from the stored pod's, it fails with a Conflict error; if there is
// no such pod, with a NotFound error; if ctx is done, with ctx.Err(). Setting
// a condition identical (type, status, reason, message) to the stored one
// changes nothing and notifies no one.
func (c *Cluster) SetPodCondition(ctx context.Context, namespace, name string, uid types.UID, cond v1.PodCondition) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.updateStatus(namespace, name, uid, func(p *v1.Pod, now metav1.Time) (bool, error) {
		return setCondition(p, cond, now), nil
	})
}

// SetPodReady reports the pod namespace/name ready or not, as its kubelet
// would: ready sets the phase to Running and the Ready condition to True;
// not ready sets Ready to False and keeps the phase. LastTransitionTime is
// stamped now when Ready's status changes. Pods are not ready until marked
// so, and only Ready pods count as healthy for a PodDisruptionBudget. It
// fails with a NotFound error if there is no such pod, and with a BadRequest
// error if ready is asked of a pod that has Succeeded or Failed (a terminal
// phase is final). Asking for the state the pod is in changes nothing and
// notifies no one.
func (c *Cluster) SetPodReady(namespace, name string, ready bool) error {
	return c.updateStatus(namespace, name, "", func(p *v1.Pod, now metav1.Time) (bool, error) {
		status := v1.ConditionFalse
		changed := false
		if ready {
			if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				return false, apierrors.NewBadRequest(fmt.Sprintf("cluster: pod %s/%s is %s and cannot become ready", p.Namespace, p.Name, p.Status.Phase))
			}
			status = v1.ConditionTrue
			changed = p.Status.Phase != v1.PodRunning
			p.Status.Phase = v1.PodRunning
		}
		// The kubelet leaves Reason empty on a Ready pod; the real reason
		// of an unready one (ContainersNotReady, …) is of no use here.
		return setCondition(p, v1.PodCondition{Type: v1.PodReady, Status: status}, now) || changed, nil
	})
}

// updateStatus applies change to a copy of the pod namespace/name and stores
// it if change reports a change, checking uid as SetPodCondition does.
func (c *Cluster) updateStatus(namespace, name string, uid types.UID, change func(p *v1.Pod, now metav1.Time) (bool, error)) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	k := types.NamespacedName{Namespace: namespace, Name: name}
	c.mu.Lock()
	old, ok := c.pods[k]
	if !ok {
		c.mu.Unlock()
		return apierrors.NewNotFound(v1.Resource("pods"), name)
	}
	if uid != "" && uid != old.UID {
		c.mu.Unlock()
		return conflict(name, uid, old.UID)
	}
	p := old.DeepCopy()
	changed, err := change(p, c.now())
	if err != nil || !changed {
		c.mu.Unlock()
		return err
	}
	c.put(old, p)
	c.mu.Unlock()
	c.notifyPod(old, p)
	return nil
}
