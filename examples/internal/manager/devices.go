package manager

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/tolerations"
)

// ReasonDeletionByDeviceTaintManager is the [v1.DisruptionTarget] condition
// reason Kubernetes' device-taint-eviction controller sets before deleting a
// pod, and the manager sets before removing a pod for a device's taint.
const ReasonDeletionByDeviceTaintManager = "DeletionByDeviceTaintManager"

// EventReasonDeviceTaintManagerEviction is the reason of the events of
// Kubernetes' device-taint-eviction controller, and of the manager's events
// about an eviction a device's taint decided.
const EventReasonDeviceTaintManagerEviction = "DeviceTaintManagerEviction"

// DevicesChanged tells the manager that the taints of pod's devices, or the
// devices allocated to it, may have changed (a ResourceSlice, a
// DeviceTaintRule or one of the pod's ResourceClaims changed): the pod is
// decided again on its node's shard, as for its own update. A pod with no
// node name is ignored. It never blocks.
func (m *Manager) DevicesChanged(pod *v1.Pod) {
	if pod == nil || pod.Spec.NodeName == "" {
		return
	}
	m.dispatcher.AddLow(podUpdate{Namespace: pod.Namespace, Name: pod.Name, NodeName: pod.Spec.NodeName})
}

// devices returns pod's devices (Config.Devices), or nil without.
func (m *Manager) devices(pod *v1.Pod) []tolerations.Device {
	if m.cfg.Devices == nil {
		return nil
	}
	return m.cfg.Devices(pod)
}

// decide decides for pod on node (nil: none, or gone) from its node's
// taints and devs' taints together, observing what the countdowns
// remember.
func (m *Manager) decide(node *v1.Node, pod *v1.Pod, devs []tolerations.Device) tolerations.Decision {
	if len(devs) == 0 {
		return m.countdowns.Decide(node, pod)
	}
	return m.countdowns.DecideWithDevices(node, pod, devs)
}

// recheck is decide from what the countdowns remember, recording nothing
// (tolerations.Countdowns.Recheck), with pod's current devices.
func (m *Manager) recheck(node *v1.Node, pod *v1.Pod) tolerations.Decision {
	if devs := m.devices(pod); len(devs) > 0 {
		return m.countdowns.RecheckWithDevices(node, pod, devs)
	}
	return m.countdowns.Recheck(node, pod)
}

// isDevice reports whether d is for a device's taint.
func isDevice(d tolerations.Decision) bool { return d.Device != (tolerations.DeviceID{}) }

// deviceKeys remembers the pods whose scheduled eviction a device's taint
// decided, so that the events of a cancel, a give-up or a dry run, which
// have no decision at hand, carry the device taint manager's reason. An
// entry costs a map slot per such pod, until its eviction ends.
type deviceKeys struct {
	mu   sync.Mutex
	m    map[types.NamespacedName]struct{}
	peak int
}

// set records whether the eviction of key is a device's.
func (k *deviceKeys) set(key types.NamespacedName, device bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !device {
		k.forgetLocked(key)
		return
	}
	if k.m == nil {
		k.m = make(map[types.NamespacedName]struct{})
	}
	k.m[key] = struct{}{}
	k.peak = max(k.peak, len(k.m))
}

// has reports whether the eviction of key is a device's.
func (k *deviceKeys) has(key types.NamespacedName) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.m[key]
	return ok
}

// forget forgets key and reports whether its eviction was a device's.
func (k *deviceKeys) forget(key types.NamespacedName) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.forgetLocked(key)
}

func (k *deviceKeys) forgetLocked(key types.NamespacedName) bool {
	if _, ok := k.m[key]; !ok {
		return false
	}
	delete(k.m, key)
	k.m = rebuildIfShrunk(k.m, &k.peak)
	return true
}

// claimsEqual reports whether two versions of a pod use the same
// ResourceClaims (a claim made from a template is named in the pod's
// status once it exists).
func claimsEqual(a, b *v1.Pod) bool {
	x, y := a.Status.ResourceClaimStatuses, b.Status.ResourceClaimStatuses
	if len(x) != len(y) || len(a.Spec.ResourceClaims) != len(b.Spec.ResourceClaims) {
		return false
	}
	for i := range x {
		if x[i].Name != y[i].Name || (x[i].ResourceClaimName == nil) != (y[i].ResourceClaimName == nil) ||
			x[i].ResourceClaimName != nil && *x[i].ResourceClaimName != *y[i].ResourceClaimName {
			return false
		}
	}
	ea, eb := a.Status.ExtendedResourceClaimStatus, b.Status.ExtendedResourceClaimStatus
	return (ea == nil) == (eb == nil) && (ea == nil || ea.ResourceClaimName == eb.ResourceClaimName)
}
