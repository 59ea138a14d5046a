package testenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// No scheduler and no DRA driver run in an Env: the helpers below do their
// part. A driver publishes its devices in ResourceSlices; the scheduler
// allocates a claim's devices and reserves the claim for the pod in one
// status update (reservedFor needs an allocation; an allocation cannot
// change: deallocate, then allocate again).

// ClaimRequest is the name of the one request of the claims [CreateClaim]
// makes: their allocation results name it.
const ClaimRequest = "device"

// PodClaim is the name under which the pods [NewPodWithClaim] makes list
// their claim in spec.resourceClaims.
const PodClaim = "device"

// DeviceID names a device as an allocation result does: the driver (a DNS
// subdomain of at most 63 characters), the pool and the device's name.
type DeviceID struct {
	Driver, Pool, Device string
}

// NoExecuteDeviceTaint returns a NoExecute device taint key=value, without a
// TimeAdded: the API server sets it to the time of the write.
func NoExecuteDeviceTaint(key, value string) resourcev1.DeviceTaint {
	return resourcev1.DeviceTaint{Key: key, Value: value, Effect: resourcev1.DeviceTaintEffectNoExecute}
}

// NewResourceSlice returns a ResourceSlice, not yet created, of the whole
// pool of driver on the node nodeName (generation 1, one slice), with a
// device per name. A slice whose devices have taints holds at most 64
// devices (the server refuses more).
func NewResourceSlice(name, driver, pool, nodeName string, devices ...string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			NodeName: &nodeName,
		},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d})
	}
	return s
}

// CreateResourceSlice creates slice, as a driver publishes its devices.
func CreateResourceSlice(ctx context.Context, c kubernetes.Interface, slice *resourcev1.ResourceSlice) (*resourcev1.ResourceSlice, error) {
	created, err := c.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: creating ResourceSlice %s: %w", slice.Name, err)
	}
	return created, nil
}

// UpdateResourceSlice applies change to the ResourceSlice named name with
// an update, retrying on conflicts, and returns the slice as stored.
func UpdateResourceSlice(ctx context.Context, c kubernetes.Interface, name string, change func(*resourcev1.ResourceSlice) error) (*resourcev1.ResourceSlice, error) {
	slices := c.ResourceV1().ResourceSlices()
	updated, err := updateObject(ctx, name, slices.Get, change, slices.Update)
	if err != nil {
		return nil, fmt.Errorf("testenv: updating ResourceSlice %s: %w", name, err)
	}
	return updated, nil
}

// TaintDevice adds taint to the device named device of the ResourceSlice
// named slice (a taint of the same key and effect is replaced), as a driver
// does, and returns the slice as stored: the server sets the taint's
// TimeAdded if it has none.
func TaintDevice(ctx context.Context, c kubernetes.Interface, slice, device string, taint resourcev1.DeviceTaint) (*resourcev1.ResourceSlice, error) {
	return UpdateResourceSlice(ctx, c, slice, func(s *resourcev1.ResourceSlice) error {
		d, err := sliceDevice(s, device)
		if err != nil {
			return err
		}
		d.Taints = append(removeDeviceTaint(d.Taints, taint.Key, taint.Effect), taint)
		return nil
	})
}

// UntaintDevice removes the taints with key and effect from the device
// named device of the ResourceSlice named slice.
func UntaintDevice(ctx context.Context, c kubernetes.Interface, slice, device, key string, effect resourcev1.DeviceTaintEffect) (*resourcev1.ResourceSlice, error) {
	return UpdateResourceSlice(ctx, c, slice, func(s *resourcev1.ResourceSlice) error {
		d, err := sliceDevice(s, device)
		if err != nil {
			return err
		}
		d.Taints = removeDeviceTaint(d.Taints, key, effect)
		return nil
	})
}

func sliceDevice(s *resourcev1.ResourceSlice, name string) (*resourcev1.Device, error) {
	for i := range s.Spec.Devices {
		if s.Spec.Devices[i].Name == name {
			return &s.Spec.Devices[i], nil
		}
	}
	return nil, fmt.Errorf("no device %q in ResourceSlice %s", name, s.Name)
}

func removeDeviceTaint(taints []resourcev1.DeviceTaint, key string, effect resourcev1.DeviceTaintEffect) []resourcev1.DeviceTaint {
	out := taints[:0:0]
	for _, t := range taints {
		if t.Key != key || t.Effect != effect {
			out = append(out, t)
		}
	}
	return out
}

// EnsureDeviceClass creates the DeviceClass named name, with no selectors
// (every device), unless it exists: a claim's request names one. The API
// server does not check that it exists; the scheduler would.
func EnsureDeviceClass(ctx context.Context, c kubernetes.Interface, name string) error {
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := c.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testenv: creating DeviceClass %s: %w", name, err)
	}
	return nil
}

// CreateClaim creates the ResourceClaim namespace/name with one request,
// [ClaimRequest], for exactly one device of deviceClass, creating the class
// if it does not exist. The claim is not allocated.
func CreateClaim(ctx context.Context, c kubernetes.Interface, namespace, name, deviceClass string) (*resourcev1.ResourceClaim, error) {
	if err := EnsureDeviceClass(ctx, c, deviceClass); err != nil {
		return nil, err
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name:    ClaimRequest,
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: deviceClass},
		}}}},
	}
	created, err := c.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: creating ResourceClaim %s/%s: %w", namespace, name, err)
	}
	return created, nil
}

// AllocateClaim allocates device to the claim namespace/name for its
// request with tolerations (as the scheduler copies a request's tolerations
// into the allocation) and reserves the claim for pod, in one update of
// the claim's status, as the scheduler does. The claim must have no
// allocation.
func AllocateClaim(ctx context.Context, c kubernetes.Interface, namespace, name string, pod *corev1.Pod, device DeviceID, tolerations ...resourcev1.DeviceToleration) (*resourcev1.ResourceClaim, error) {
	claim, err := updateClaimStatus(ctx, c, namespace, name, func(st *resourcev1.ResourceClaimStatus) {
		st.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request:     ClaimRequest,
			Driver:      device.Driver,
			Pool:        device.Pool,
			Device:      device.Device,
			Tolerations: tolerations,
		}}}}
		st.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: allocating ResourceClaim %s/%s: %w", namespace, name, err)
	}
	return claim, nil
}

// DeallocateClaim clears the claim's reservations and allocation, as the
// resource claim controller does once its pods are gone, so that it can be
// allocated again.
func DeallocateClaim(ctx context.Context, c kubernetes.Interface, namespace, name string) (*resourcev1.ResourceClaim, error) {
	claim, err := updateClaimStatus(ctx, c, namespace, name, func(st *resourcev1.ResourceClaimStatus) {
		st.Allocation, st.ReservedFor = nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: deallocating ResourceClaim %s/%s: %w", namespace, name, err)
	}
	return claim, nil
}

func updateClaimStatus(ctx context.Context, c kubernetes.Interface, namespace, name string, change func(*resourcev1.ResourceClaimStatus)) (*resourcev1.ResourceClaim, error) {
	claims := c.ResourceV1().ResourceClaims(namespace)
	return updateObject(ctx, name, claims.Get, func(claim *resourcev1.ResourceClaim) error {
		change(&claim.Status)
		return nil
	}, claims.UpdateStatus)
}

// NewPodWithClaim returns [NewPod]'s pod that uses the ResourceClaim named
// claim (spec.resourceClaims, as [PodClaim], and its container's
// resources.claims), not yet created and not yet on a node.
func NewPodWithClaim(namespace, name, claim string, tolerations ...corev1.Toleration) *corev1.Pod {
	pod := NewPod(namespace, name, tolerations...)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: PodClaim, ResourceClaimName: &claim}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: PodClaim}}
	return pod
}

// ClaimedPodSpec says what [CreateClaimedPod] makes.
type ClaimedPodSpec struct {
	Namespace, Name string
	// Node is the pod's node: set through pods/binding if Bind (the pod then
	// has a PodScheduled time, as the scheduler binds), else at create (no
	// PodScheduled condition: the controller counts from its first sight).
	Node string
	Bind bool
	// DeviceClass is the class the claim's request names ("" means
	// "testenv"); it is created if it does not exist.
	DeviceClass string
	// Device is the device allocated, with Tolerations (the request's,
	// which the scheduler copies into the allocation).
	Device      DeviceID
	Tolerations []resourcev1.DeviceToleration
	// Pod, if not nil, changes the pod before it is created (its own
	// tolerations, its labels).
	Pod func(*corev1.Pod)
}

// ClaimedPod is a pod and its claim, as [CreateClaimedPod] made them.
type ClaimedPod struct {
	Pod   *corev1.Pod
	Claim *resourcev1.ResourceClaim
}

// CreateClaimedPod creates the claim spec.Name+"-claim" for a device of the
// class, a pod that uses it on the node, and then allocates the device to
// the claim and reserves it for the pod in one status update: what a user,
// the scheduler and a driver do for a pod that uses a device.
func CreateClaimedPod(ctx context.Context, c kubernetes.Interface, spec ClaimedPodSpec) (ClaimedPod, error) {
	class := spec.DeviceClass
	if class == "" {
		class = "testenv"
	}
	claim, err := CreateClaim(ctx, c, spec.Namespace, spec.Name+"-claim", class)
	if err != nil {
		return ClaimedPod{}, err
	}
	pod := NewPodWithClaim(spec.Namespace, spec.Name, claim.Name)
	if spec.Pod != nil {
		spec.Pod(pod)
	}
	if spec.Bind {
		pod, err = CreateBoundPod(ctx, c, pod, spec.Node)
	} else {
		pod, err = CreatePodOnNode(ctx, c, pod, spec.Node)
	}
	if err != nil {
		return ClaimedPod{}, err
	}
	claim, err = AllocateClaim(ctx, c, spec.Namespace, claim.Name, pod, spec.Device, spec.Tolerations...)
	if err != nil {
		return ClaimedPod{}, err
	}
	return ClaimedPod{Pod: pod, Claim: claim}, nil
}

// CreateDeviceTaintRule creates the DeviceTaintRule name that puts taint on
// the devices sel selects (nil: none; empty: every device). The server sets
// the taint's TimeAdded if it has none.
func CreateDeviceTaintRule(ctx context.Context, c kubernetes.Interface, name string, sel *resourcev1.DeviceTaintSelector, taint resourcev1.DeviceTaint) (*resourcev1.DeviceTaintRule, error) {
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: taint},
	}
	created, err := c.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: creating DeviceTaintRule %s: %w", name, err)
	}
	return created, nil
}

// UpdateDeviceTaintRule applies change to the spec of the DeviceTaintRule
// named name with an update, retrying on conflicts, and returns the rule
// as stored.
func UpdateDeviceTaintRule(ctx context.Context, c kubernetes.Interface, name string, change func(*resourcev1.DeviceTaintRuleSpec)) (*resourcev1.DeviceTaintRule, error) {
	rules := c.ResourceV1().DeviceTaintRules()
	updated, err := updateObject(ctx, name, rules.Get, func(r *resourcev1.DeviceTaintRule) error {
		change(&r.Spec)
		return nil
	}, rules.Update)
	if err != nil {
		return nil, fmt.Errorf("testenv: updating DeviceTaintRule %s: %w", name, err)
	}
	return updated, nil
}

// updateObject reads the object named name with get, applies change and
// writes it with update, again from a fresh read on a conflict with
// another writer; it returns the object as stored.
func updateObject[T any](ctx context.Context, name string,
	get func(context.Context, string, metav1.GetOptions) (*T, error),
	change func(*T) error,
	update func(context.Context, *T, metav1.UpdateOptions) (*T, error),
) (*T, error) {
	var updated *T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := change(obj); err != nil {
			return err
		}
		updated, err = update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	return updated, err
}
