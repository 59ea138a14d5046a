package app

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/taintkit/taintkit/examples/controller/internal/devicetaints"
	"github.com/taintkit/taintkit/tolerations"
)

// acceptPodGroups is what the controller passes as resourceclaim's
// acceptPodGroupOwner and acceptPodGroupReservation: a claim made for a
// pod's PodGroup, or reserved for it, is the pod's. Kubernetes' controller
// passes whether the DRAWorkloadResourceClaims feature gate is on, which a
// controller outside kube-controller-manager cannot read. True is right
// either way: only the scheduler and the PodGroup controller, with the gate
// on, make a claim for a PodGroup or reserve one for it, and a pod that
// names such a claim runs with its devices, so a NoExecute taint on them
// must evict it. The one difference: a cluster that turned the gate off
// after using it keeps its PodGroups' reservations, and Kubernetes then
// leaves their pods on tainted devices; this controller evicts them.
const acceptPodGroups = true

// podGroupIndex is the name of the pod informer's index on the pod's
// namespace and PodGroup name (spec.schedulingGroup.podGroupName), with
// --device-taints.
const podGroupIndex = "podGroup"

// devices is the controller's view of DRA devices (with --device-taints):
// informers for ResourceSlices, DeviceTaintRules and ResourceClaims, the
// taints of every device (a devicetaints.Tracker), an index of the
// allocated devices' claims, and the guard on rules that would evict too
// many pods. It is fed by the informers from their start, on every replica,
// so that a standby that takes over holds the rules the leader held; only
// the leader's manager is told which pods to decide again (setTarget).
type devices struct {
	log     logr.Logger
	maxPods int // --device-taint-rule-max-pods; 0: no limit

	slices, rules, claims cache.SharedIndexInformer
	claimLister           resourcelisters.ResourceClaimLister
	ruleLister            resourcelisters.DeviceTaintRuleLister
	sliceLister           resourcelisters.ResourceSliceLister
	getPod                func(namespace, name string) (*v1.Pod, error)
	// podGroupPods returns the pods of the PodGroup namespace/name.
	podGroupPods func(namespace, name string) []*v1.Pod

	taints *devicetaints.Tracker
	// synced are the handlers' sync checks: each has seen the objects of
	// its informer's first list.
	synced []cache.DoneChecker

	mu sync.Mutex
	// byDevice holds, for each allocated device, the claims it is
	// allocated to; claimDevices each claim's devices, to take them out of
	// byDevice when it changes.
	byDevice     map[tolerations.DeviceID]map[types.NamespacedName]struct{}
	claimDevices map[types.NamespacedName][]tolerations.DeviceID
	// evictedCount counts the pods each rule (by UID) evicted since the
	// process started, for its status.
	evictedCount map[types.UID]int

	// guardMu serialises the guard's decisions: a count and the Hold it
	// leads to, and a rule's Hold with its ObserveRule, so that an older
	// count never overrides a newer one.
	guardMu sync.Mutex

	// target is told of the pods to decide again and of the rules whose
	// status to write: the leader's manager and status writer; nil on a
	// standby.
	target atomic.Pointer[deviceTarget]
}

// deviceTarget is where the devices' changes go while this replica leads.
type deviceTarget struct {
	devicesChanged func(pod *v1.Pod)
	ruleChanged    func(name string)
}

// addDevices sets up c.devices: the device informers are c.factory's,
// started with it; their handlers, and one on pods, are added here.
func (c *cluster) addDevices(maxPods int, log logr.Logger) error {
	if err := c.pods.AddIndexers(cache.Indexers{podGroupIndex: podGroupKey}); err != nil {
		return fmt.Errorf("app: add pod index: %w", err)
	}
	f := c.factory.Resource().V1()
	x := &devices{
		log:          log.WithName("devices"),
		maxPods:      maxPods,
		slices:       f.ResourceSlices().Informer(),
		rules:        f.DeviceTaintRules().Informer(),
		claims:       f.ResourceClaims().Informer(),
		claimLister:  f.ResourceClaims().Lister(),
		ruleLister:   f.DeviceTaintRules().Lister(),
		sliceLister:  f.ResourceSlices().Lister(),
		getPod:       c.getPod,
		podGroupPods: c.podGroupPods,
		taints:       devicetaints.New(),
		byDevice:     make(map[tolerations.DeviceID]map[types.NamespacedName]struct{}),
		claimDevices: make(map[types.NamespacedName][]tolerations.DeviceID),
		evictedCount: make(map[types.UID]int),
	}
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{x.slices, eventHandler(x.sliceChanged, log)},
		{x.rules, eventHandler(x.ruleChanged, log)},
		{x.claims, eventHandler(x.claimChanged, log)},
		{c.pods, eventHandler(x.podChanged, log)},
	} {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return fmt.Errorf("app: add device handler: %w", err)
		}
		x.synced = append(x.synced, reg.HasSyncedChecker())
	}
	c.devices = x
	return nil
}

// hasSynced are the sync checks of the device handlers: the manager must
// not start before they have seen the first lists, or it would decide with
// a rule the guard has not counted yet.
func (x *devices) hasSynced() []cache.DoneChecker { return x.synced }

// setTarget makes t the receiver of the devices' changes; nil stops them.
func (x *devices) setTarget(t *deviceTarget) { x.target.Store(t) }

// podDevices is the manager's Config.Devices: the devices of the pod's
// claims ([isPodsClaim]), each with the tolerations it was allocated with
// and its taints now.
func (x *devices) podDevices(pod *v1.Pod) []tolerations.Device {
	var out []tolerations.Device
	for name, mustCheckOwner := range resourceclaim.PodClaims(pod) {
		claim, err := x.claimLister.ResourceClaims(pod.Namespace).Get(name)
		if err != nil || !isPodsClaim(pod, claim, mustCheckOwner) {
			continue // not there yet (its add event decides the pod again), or not the pod's
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			id := tolerations.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
			out = append(out, tolerations.Device{ID: id, Tolerations: r.Tolerations, Taints: x.taints.Taints(id)})
		}
	}
	return out
}

// isPodsClaim reports whether claim, which pod names (mustCheckOwner as
// resourceclaim.PodClaims says), holds devices of pod, as Kubernetes'
// device-taint-eviction controller reads it: allocated, made for the pod
// or its PodGroup if made from a template, and reserved for the pod or its
// PodGroup. A claim reserved for another pod is one the pod has not got
// yet, or one a pod of the same name had before it.
func isPodsClaim(pod *v1.Pod, claim *resourcev1.ResourceClaim, mustCheckOwner bool) bool {
	return claim.Status.Allocation != nil &&
		(!mustCheckOwner || resourceclaim.IsForPod(pod, claim, acceptPodGroups) == nil) &&
		resourceclaim.IsReservedForPod(pod, claim, acceptPodGroups)
}

// claimPods returns the pods claim holds devices of ([isPodsClaim]): among
// those its status.reservedFor names and the pods of the PodGroups it
// names, those that name it.
func (x *devices) claimPods(claim *resourcev1.ResourceClaim) []*v1.Pod {
	var candidates, out []*v1.Pod
	for _, r := range claim.Status.ReservedFor {
		switch {
		case r.APIGroup == "" && r.Resource == "pods":
			if pod, err := x.getPod(claim.Namespace, r.Name); err == nil {
				candidates = append(candidates, pod)
			}
		case acceptPodGroups && r.APIGroup == schedulingv1.GroupName && r.Resource == "podgroups":
			candidates = append(candidates, x.podGroupPods(claim.Namespace, r.Name)...)
		}
	}
	for _, pod := range candidates {
		for name, mustCheckOwner := range resourceclaim.PodClaims(pod) {
			if name == claim.Name {
				if isPodsClaim(pod, claim, mustCheckOwner) {
					out = append(out, pod)
				}
				break
			}
		}
	}
	return out
}

// claimChanged indexes the claim's allocated devices, checks the guard of
// every rule that selects one of them (the claim may bring a rule more pods
// to evict, or fewer), and has the pods it was or is reserved for decided
// again.
func (x *devices) claimChanged(old, claim *resourcev1.ResourceClaim) {
	obj := claim
	if obj == nil {
		obj = old
	}
	key := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
	var ids []tolerations.DeviceID
	if claim != nil && claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			ids = append(ids, tolerations.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device})
		}
	}
	x.mu.Lock()
	before := x.claimDevices[key]
	for _, id := range before {
		if s := x.byDevice[id]; s != nil {
			delete(s, key)
			if len(s) == 0 {
				delete(x.byDevice, id)
			}
		}
	}
	delete(x.claimDevices, key)
	for _, id := range ids {
		s := x.byDevice[id]
		if s == nil {
			s = make(map[types.NamespacedName]struct{})
			x.byDevice[id] = s
		}
		s[key] = struct{}{}
	}
	if len(ids) > 0 {
		x.claimDevices[key] = ids
	}
	x.mu.Unlock()

	x.guardRulesOf(append(before, ids...))
	for _, c := range []*resourcev1.ResourceClaim{old, claim} {
		if c != nil {
			x.decideAgain(c)
		}
	}
}

// podChanged checks the guard of the rules that select the devices of a
// pod added, bound, terminating or deleted: a rule's guard counts the bound
// pods until they are gone, its status's pending pods those not terminating.
func (x *devices) podChanged(old, pod *v1.Pod) {
	if old != nil && pod != nil && old.UID == pod.UID && old.Spec.NodeName == pod.Spec.NodeName &&
		(old.DeletionTimestamp == nil) == (pod.DeletionTimestamp == nil) {
		return
	}
	p := pod
	if p == nil {
		p = old
	}
	var ids []tolerations.DeviceID
	x.mu.Lock()
	for name := range resourceclaim.PodClaims(p) {
		ids = append(ids, x.claimDevices[types.NamespacedName{Namespace: p.Namespace, Name: name}]...)
	}
	x.mu.Unlock()
	x.guardRulesOf(ids)
}

// sliceChanged records the slice's taints and has the pods of the devices
// in its pool decided again if they may have changed. Slice taints are a
// driver's, per device: they are not guarded.
func (x *devices) sliceChanged(old, slice *resourcev1.ResourceSlice) {
	var changed bool
	var pools []tolerations.DeviceID // driver and pool only
	if slice != nil {
		changed = x.taints.ObserveSlice(slice)
		pools = append(pools, tolerations.DeviceID{Driver: slice.Spec.Driver, Pool: slice.Spec.Pool.Name})
	} else {
		changed = x.taints.ForgetSlice(old.Name)
	}
	if old != nil {
		pools = append(pools, tolerations.DeviceID{Driver: old.Spec.Driver, Pool: old.Spec.Pool.Name})
	}
	if !changed {
		return
	}
	x.decideDevicesAgain(func(id tolerations.DeviceID) bool {
		for _, p := range pools {
			if id.Driver == p.Driver && id.Pool == p.Pool {
				return true
			}
		}
		return false
	})
	// A rule with effect None previews what it selects, slices included.
	for _, r := range x.taints.Rules() {
		if r.Spec.Taint.Effect == resourcev1.DeviceTaintEffectNone {
			x.statusChanged(r.Name)
		}
	}
}

// ruleChanged guards and records the rule, and has the pods of the devices
// it selected or selects decided again. An update that leaves the rule's
// spec alone (its status, say) is only recorded.
func (x *devices) ruleChanged(old, rule *resourcev1.DeviceTaintRule) {
	if old != nil && rule != nil && old.Generation == rule.Generation && old.UID == rule.UID {
		x.taints.ObserveRule(rule)
		return
	}
	x.guardMu.Lock()
	if rule != nil {
		x.guardLocked(rule)
		x.taints.ObserveRule(rule)
	} else {
		x.taints.ForgetRule(old.Name)
	}
	x.guardMu.Unlock()
	x.decideDevicesAgain(func(id tolerations.DeviceID) bool {
		return old != nil && devicetaints.RuleSelects(old.Spec.DeviceSelector, id) ||
			rule != nil && devicetaints.RuleSelects(rule.Spec.DeviceSelector, id)
	})
	if rule != nil {
		x.statusChanged(rule.Name)
	}
}

// guardRulesOf checks the guard of every rule that selects one of ids and
// tells the status writer of them.
func (x *devices) guardRulesOf(ids []tolerations.DeviceID) {
	if len(ids) == 0 {
		return
	}
	for _, r := range x.taints.Rules() {
		selects := false
		for _, id := range ids {
			if devicetaints.RuleSelects(r.Spec.DeviceSelector, id) {
				selects = true
				break
			}
		}
		if !selects {
			continue
		}
		x.guardMu.Lock()
		changed := x.guardLocked(r)
		x.guardMu.Unlock()
		if changed {
			sel := r.Spec.DeviceSelector
			x.decideDevicesAgain(func(id tolerations.DeviceID) bool { return devicetaints.RuleSelects(sel, id) })
		}
		x.statusChanged(r.Name)
	}
}

// guardLocked holds the rule if its NoExecute taint would evict more pods
// than the limit, and releases it otherwise. It reports whether that
// changed the rule's hold. x.guardMu is held.
func (x *devices) guardLocked(rule *resourcev1.DeviceTaintRule) bool {
	held, n := false, ruleCount{}
	if x.maxPods > 0 && rule.Spec.Taint.Effect == resourcev1.DeviceTaintEffectNoExecute {
		n = x.count(rule, time.Now())
		held = n.pods > x.maxPods
	}
	if !x.taints.Hold(rule.Name, held) {
		return false
	}
	if held {
		x.log.Info("Holding a DeviceTaintRule: its NoExecute taint would evict more pods than the limit; no eviction starts for it",
			"deviceTaintRule", rule.Name, "pods", n.pods, "namespaces", n.namespaces, "limit", x.maxPods)
	} else {
		x.log.Info("Releasing a DeviceTaintRule held for evicting too many pods", "deviceTaintRule", rule.Name, "pods", n.pods, "limit", x.maxPods)
	}
	return true
}

// ruleCount is what a DeviceTaintRule's taint selects and would evict.
type ruleCount struct {
	// pods is how many bound pods the rule's taint would evict as a
	// NoExecute taint (now or later: those that do not tolerate it
	// forever), in namespaces namespaces: what the guard compares with the
	// limit. A terminating pod counts until it is gone: it still holds its
	// device, and the evictions a rule starts must not make room for more.
	pods, namespaces int
	// pending and pendingNamespaces are those of pods that are not
	// terminating: the pods that still need to be evicted, as upstream's
	// status counts them.
	pending, pendingNamespaces int
	// allocated is how many allocated devices the rule selects.
	allocated int
}

// count counts what rule selects and would evict as a NoExecute taint,
// whatever its effect, from the claims' and pods' caches.
func (x *devices) count(rule *resourcev1.DeviceTaintRule, now time.Time) ruleCount {
	sel := rule.Spec.DeviceSelector
	taint := rule.Spec.Taint
	taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	var n ruleCount
	claims := make(map[types.NamespacedName]struct{})
	x.mu.Lock()
	for id, cs := range x.byDevice {
		if !devicetaints.RuleSelects(sel, id) {
			continue
		}
		n.allocated++
		for k := range cs {
			claims[k] = struct{}{}
		}
	}
	x.mu.Unlock()
	pods, pending := make(map[types.UID]struct{}), make(map[types.UID]struct{})
	namespaces, pendingNamespaces := make(map[string]struct{}), make(map[string]struct{})
	for k := range claims {
		claim, err := x.claimLister.ResourceClaims(k.Namespace).Get(k.Name)
		if err != nil {
			continue
		}
		for _, pod := range x.claimPods(claim) {
			if _, seen := pods[pod.UID]; seen || pod.Spec.NodeName == "" {
				continue
			}
			for _, res := range claim.Status.Allocation.Devices.Results {
				id := tolerations.DeviceID{Driver: res.Driver, Pool: res.Pool, Device: res.Device}
				if !devicetaints.RuleSelects(sel, id) {
					continue
				}
				dev := tolerations.Device{ID: id, Tolerations: res.Tolerations,
					Taints: []tolerations.DeviceTaint{{DeviceTaint: taint, Rule: rule.Name}}}
				if tolerations.DecideDevices([]tolerations.Device{dev}, time.Time{}, now).Action != tolerations.Never {
					pods[pod.UID] = struct{}{}
					namespaces[pod.Namespace] = struct{}{}
					if pod.DeletionTimestamp == nil {
						pending[pod.UID] = struct{}{}
						pendingNamespaces[pod.Namespace] = struct{}{}
					}
					break
				}
			}
		}
	}
	n.pods, n.namespaces = len(pods), len(namespaces)
	n.pending, n.pendingNamespaces = len(pending), len(pendingNamespaces)
	return n
}

// published counts the devices of the ResourceSlices (a pool's newest
// generation) that rule selects.
func (x *devices) published(rule *resourcev1.DeviceTaintRule) int {
	slices, err := x.sliceLister.List(labels.Everything())
	if err != nil {
		return 0
	}
	type pool struct{ driver, name string }
	newest := make(map[pool]int64)
	for _, s := range slices {
		p := pool{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[p]; !ok || s.Spec.Pool.Generation > g {
			newest[p] = s.Spec.Pool.Generation
		}
	}
	n := 0
	for _, s := range slices {
		if s.Spec.Pool.Generation != newest[pool{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		for _, d := range s.Spec.Devices {
			if devicetaints.RuleSelects(rule.Spec.DeviceSelector, tolerations.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}) {
				n++
			}
		}
	}
	return n
}

// decideDevicesAgain has the leader's manager decide again every pod of an
// allocated device that match selects.
func (x *devices) decideDevicesAgain(match func(tolerations.DeviceID) bool) {
	if x.target.Load() == nil {
		return
	}
	claims := make(map[types.NamespacedName]struct{})
	x.mu.Lock()
	for id, cs := range x.byDevice {
		if match(id) {
			for k := range cs {
				claims[k] = struct{}{}
			}
		}
	}
	x.mu.Unlock()
	for k := range claims {
		if claim, err := x.claimLister.ResourceClaims(k.Namespace).Get(k.Name); err == nil {
			x.decideAgain(claim)
		}
	}
}

// decideAgain has the leader's manager decide again the pods claim holds
// devices of.
func (x *devices) decideAgain(claim *resourcev1.ResourceClaim) {
	t := x.target.Load()
	if t == nil {
		return
	}
	for _, pod := range x.claimPods(claim) {
		t.devicesChanged(pod)
	}
}

// statusChanged tells the leader's status writer that the rule's status
// may have changed.
func (x *devices) statusChanged(rule string) {
	if t := x.target.Load(); t != nil && t.ruleChanged != nil {
		t.ruleChanged(rule)
	}
}

// trimDeviceObjects keeps of ResourceSlices and ResourceClaims only what
// the controller reads, before they are cached: a slice's driver, pool and
// devices' names and taints; a claim's metadata (its owner says whose a
// claim made from a template is), its allocated devices with their
// tolerations, and whom it is reserved for.
func trimDeviceObjects(obj any) {
	switch o := obj.(type) {
	case *resourcev1.ResourceSlice:
		devs := make([]resourcev1.Device, len(o.Spec.Devices))
		for i, d := range o.Spec.Devices {
			devs[i] = resourcev1.Device{Name: d.Name, Taints: d.Taints}
		}
		o.Spec = resourcev1.ResourceSliceSpec{Driver: o.Spec.Driver, Pool: o.Spec.Pool, Devices: devs}
	case *resourcev1.ResourceClaim:
		o.Spec = resourcev1.ResourceClaimSpec{}
		st := resourcev1.ResourceClaimStatus{ReservedFor: o.Status.ReservedFor}
		if a := o.Status.Allocation; a != nil {
			res := make([]resourcev1.DeviceRequestAllocationResult, len(a.Devices.Results))
			for i, r := range a.Devices.Results {
				res[i] = resourcev1.DeviceRequestAllocationResult{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device, Tolerations: r.Tolerations}
			}
			st.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: res}}
		}
		o.Status = st
	}
}
