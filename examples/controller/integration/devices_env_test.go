package integration_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// The world of the device taint tests: no scheduler and no DRA driver run,
// so the tests publish ResourceSlices, allocate ResourceClaims (one status
// update writes the allocation and reservedFor together) and create pods
// with spec.nodeName, as those would.

// gpuDriver is the DRA driver of the tests' devices.
const gpuDriver = "gpu.example.com"

// brokenKey is the key of the tests' device taints.
const brokenKey = "example.com/broken"

// deviceRuns counts the device tests run by this test binary.
var deviceRuns atomic.Int64

var deviceRBACOnce struct {
	sync.Once
	err error
}

// applyDeviceRBAC grants the controller's ServiceAccount what --device-taints
// reads and writes (list and watch ResourceSlices, ResourceClaims and
// DeviceTaintRules; patch DeviceTaintRules' status), once per test binary,
// and waits until the authorizer allows it. (deploy/ grants it in a
// component of its own; these tests apply only the base RBAC from there.)
func applyDeviceRBAC(ctx context.Context, env *testenv.Env) error {
	deviceRBACOnce.Do(func() {
		c := env.Client()
		name := saName + "-device-taints-test"
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices", "resourceclaims", "devicetaintrules"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"devicetaintrules/status"}, Verbs: []string{"patch"}},
			},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: saName, Namespace: saNamespace}},
		}
		if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			deviceRBACOnce.err = err
			return
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			deviceRBACOnce.err = err
			return
		}
		cfg := env.ImpersonatedConfig(saNamespace, saName)
		for _, attrs := range []authorizationv1.ResourceAttributes{
			{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceslices"},
			{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceclaims"},
			{Verb: "watch", Group: "resource.k8s.io", Resource: "devicetaintrules"},
			{Verb: "patch", Group: "resource.k8s.io", Resource: "devicetaintrules", Subresource: "status"},
		} {
			if err := testenv.WaitForAccess(ctx, cfg, attrs); err != nil {
				deviceRBACOnce.err = err
				return
			}
		}
	})
	return deviceRBACOnce.err
}

// setupDevices is setup for a device taint test: the namespace (ns and a
// number), the kubelet
// stand-in and the device RBAC. At the end it deletes the test's
// ResourceSlices and DeviceTaintRules (cluster-scoped, labelled with the
// namespace) and its claims. It runs without the oracle, which has no model
// of device taints yet: it would judge every device eviction early.
func setupDevices(t *testing.T, ns string) *harness {
	t.Helper()
	ns = fmt.Sprintf("%s-%d", ns, deviceRuns.Add(1)) // a namespace per run: go test -count
	h := setupNamespace(t, ns, false)
	require.NoError(t, applyDeviceRBAC(h.ctx, h.env))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sel := metav1.ListOptions{LabelSelector: "test-namespace=" + ns}
		r := h.c.ResourceV1()
		assert.NoError(t, r.DeviceTaintRules().DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
		assert.NoError(t, r.ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
		assert.NoError(t, r.ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	})
	return h
}

// withDeviceTaints runs the controller with --device-taints and
// --device-taint-rule-max-pods=maxPods.
func withDeviceTaints(maxPods int) func(*app.Options) {
	return func(o *app.Options) {
		o.DeviceTaints = true
		o.DeviceTaintRuleMaxPods = maxPods
	}
}

// slice publishes pool (one ResourceSlice, generation 1) of node's devices,
// named devices, with taints by device name.
func (h *harness) slice(pool, node string, devices []string, taints map[string][]resourcev1.DeviceTaint) *resourcev1.ResourceSlice {
	h.t.Helper()
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: pool, Labels: map[string]string{"test-namespace": h.ns}},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   gpuDriver,
			Pool:     resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d, Taints: taints[d]})
	}
	created, err := h.c.ResourceV1().ResourceSlices().Create(h.ctx, s, metav1.CreateOptions{})
	require.NoError(h.t, err)
	return created
}

// taintSlice sets the taints of device in the slice named name (the server
// sets their TimeAdded) and returns the slice as stored.
func (h *harness) taintSlice(name, device string, taints ...resourcev1.DeviceTaint) *resourcev1.ResourceSlice {
	h.t.Helper()
	var updated *resourcev1.ResourceSlice
	require.NoError(h.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := h.c.ResourceV1().ResourceSlices().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == device {
				s.Spec.Devices[i].Taints = taints
			}
		}
		updated, err = h.c.ResourceV1().ResourceSlices().Update(h.ctx, s, metav1.UpdateOptions{})
		return err
	}))
	return updated
}

// devicePod is a pod of the tests: its claim's request, the device
// allocated with the request's tolerations, the pod's own tolerations (of
// node taints) and labels.
type devicePod struct {
	name, node, pool, device string
	deviceTolerations        []resourcev1.DeviceToleration
	tolerations              []corev1.Toleration
	labels                   map[string]string
	ready                    bool // reported Running and Ready, as the Eviction API wants for budgets
}

// create creates the pod's claim, then the pod bound to its node (with a
// PodScheduled time), then allocates the claim's device and reserves it for
// the pod in one status update, and returns the pod as stored.
func (p devicePod) create(h *harness) *corev1.Pod {
	h.t.Helper()
	claims := h.c.ResourceV1().ResourceClaims(h.ns)
	claim, err := claims.Create(h.ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: p.name + "-gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name:    "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuDriver},
		}}}},
	}, metav1.CreateOptions{})
	require.NoError(h.t, err)
	pod := testenv.NewPod(h.ns, p.name, p.tolerations...)
	pod.Labels = p.labels
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
	pod, err = testenv.CreateBoundPod(h.ctx, h.c, pod, p.node)
	require.NoError(h.t, err)
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: gpuDriver, Pool: p.pool, Device: p.device, Tolerations: p.deviceTolerations,
	}}}}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	_, err = claims.UpdateStatus(h.ctx, claim, metav1.UpdateOptions{})
	require.NoError(h.t, err)
	if p.ready {
		pod, err = testenv.MarkPodReady(h.ctx, h.c, h.ns, p.name)
		require.NoError(h.t, err)
	}
	return pod
}

// brokenTaint is the tests' NoExecute device taint.
func brokenTaint() resourcev1.DeviceTaint {
	return resourcev1.DeviceTaint{Key: brokenKey, Value: "true", Effect: resourcev1.DeviceTaintEffectNoExecute}
}

// tolerateBroken tolerates brokenTaint for d (whole seconds) with effect
// ("" tolerates every effect).
func tolerateBroken(d time.Duration, effect resourcev1.DeviceTaintEffect) []resourcev1.DeviceToleration {
	return []resourcev1.DeviceToleration{{Key: brokenKey, Operator: resourcev1.DeviceTolerationOpExists, Effect: effect, TolerationSeconds: seconds(d)}}
}

// rule creates the DeviceTaintRule named after the test's namespace and
// suffix, and returns it as stored (with its taint's TimeAdded).
func (h *harness) rule(suffix string, sel resourcev1.DeviceTaintSelector, taint resourcev1.DeviceTaint) *resourcev1.DeviceTaintRule {
	h.t.Helper()
	r, err := h.c.ResourceV1().DeviceTaintRules().Create(h.ctx, &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: h.ns + "-" + suffix, Labels: map[string]string{"test-namespace": h.ns}},
		Spec:       resourcev1.DeviceTaintRuleSpec{DeviceSelector: &sel, Taint: taint},
	}, metav1.CreateOptions{})
	require.NoError(h.t, err)
	require.NotNil(h.t, r.Spec.Taint.TimeAdded, "the server sets a rule's TimeAdded")
	return r
}

// poolSelector selects the devices of pool.
func poolSelector(pool string) resourcev1.DeviceTaintSelector {
	return resourcev1.DeviceTaintSelector{Driver: ptr.To(gpuDriver), Pool: ptr.To(pool)}
}

// deviceDeadline is when a pod bound at its PodScheduled time is due for
// a device taint added at added, tolerated for d: the later of the two,
// plus d, from the values the server stored (whole seconds).
func deviceDeadline(t *testing.T, pod *corev1.Pod, added *metav1.Time, d time.Duration) time.Time {
	t.Helper()
	require.NotNil(t, added)
	scheduled := condition(pod, corev1.PodScheduled)
	require.NotNil(t, scheduled, "pod %s has no PodScheduled", pod.Name)
	start := added.Time
	if scheduled.LastTransitionTime.After(start) {
		start = scheduled.LastTransitionTime.Time
	}
	return start.Add(d)
}

// assertGoneAt checks that the controller's DELETE of pod came no earlier
// than deadline and the pod was gone by deadline + 2 s, and returns how far
// from the deadline it went.
func (h *harness) assertGoneAt(ctrl *controller, w *podWatch, deadline time.Time) time.Duration {
	h.t.Helper()
	gone := w.waitDeleted(h.t, time.Until(deadline.Add(15*time.Second)))
	deleting, ok := ctrl.deleteCalled(w.pod.UID)
	require.True(h.t, ok, "pod %s was deleted, but not by the controller", w.pod.Name)
	assert.False(h.t, deleting.Before(deadline), "pod %s: DELETE %s before its deadline", w.pod.Name, ms(deadline.Sub(deleting)))
	assert.LessOrEqual(h.t, gone.Sub(deadline), 2*time.Second, "pod %s gone %s after its deadline", w.pod.Name, ms(gone.Sub(deadline)))
	return gone.Sub(deadline)
}

// waitForRuleCondition waits until the rule's EvictionInProgress condition
// satisfies ok, and returns it.
func (h *harness) waitForRuleCondition(ctx context.Context, name string, ok func(metav1.Condition) bool) (metav1.Condition, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	rules := h.c.ResourceV1().DeviceTaintRules()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return rules.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return rules.Watch(ctx, o)
		},
	}
	var found metav1.Condition
	match := func(obj any) bool {
		r, isRule := obj.(*resourcev1.DeviceTaintRule)
		if !isRule {
			return false
		}
		i := slices.IndexFunc(r.Status.Conditions, func(c metav1.Condition) bool {
			return c.Type == resourcev1.DeviceTaintConditionEvictionInProgress
		})
		if i >= 0 && ok(r.Status.Conditions[i]) {
			found = r.Status.Conditions[i]
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &resourcev1.DeviceTaintRule{},
		func(store cache.Store) (bool, error) { return slices.ContainsFunc(store.List(), match), nil },
		func(ev watch.Event) (bool, error) { return ev.Type != watch.Deleted && match(ev.Object), nil })
	if err != nil {
		return found, fmt.Errorf("waiting for the EvictionInProgress condition of DeviceTaintRule %s: %w", name, err)
	}
	return found, nil
}

// waitForRuleEvent waits for an event about the DeviceTaintRule named
// name with reason, in namespace default (rules are cluster-scoped).
func (h *harness) waitForRuleEvent(ctx context.Context, name, reason string) (*corev1.Event, error) {
	lw := eventListWatch(h.c.CoreV1().Events(metav1.NamespaceDefault), eventSelector(name, reason))
	var found *corev1.Event
	match := func(obj any) bool {
		e, ok := obj.(*corev1.Event)
		if ok && e.InvolvedObject.Kind == "DeviceTaintRule" {
			found = e
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Event{},
		func(store cache.Store) (bool, error) { return slices.ContainsFunc(store.List(), match), nil },
		func(ev watch.Event) (bool, error) { return ev.Type != watch.Deleted && match(ev.Object), nil })
	return found, err
}
