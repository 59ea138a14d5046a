package integration_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// The world of the device taint tests: no scheduler and no DRA driver run,
// so the tests publish ResourceSlices, allocate ResourceClaims and create
// pods bound to their nodes with testenv's helpers, as those would. The
// pods and their claims are in the test's namespace, which the oracle
// watches.

// gpuDriver is the DRA driver of the tests' devices.
const gpuDriver = "gpu.example.com"

// brokenKey is the key of the tests' device taints.
const brokenKey = "example.com/broken"

// deviceRuns counts the device tests run by this test binary.
var deviceRuns atomic.Int64

// setupDevices is setup for a device taint test, in a namespace of its own
// per run (ns and a number: go test -count), with the oracle. At the end
// it deletes the test's claims; the slices and rules its helpers made
// delete themselves.
func setupDevices(t *testing.T, ns string) *harness {
	t.Helper()
	ns = fmt.Sprintf("%s-%d", ns, deviceRuns.Add(1))
	h := setup(t, ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, h.c.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	})
	return h
}

// withDeviceTaints runs the controller with --device-taints and
// --device-taint-rule-max-pods=maxPods, and tells the oracle the limit
// from now on.
func (h *harness) withDeviceTaints(maxPods int) func(*app.Options) {
	h.oracle.RuleMaxPods(time.Now(), maxPods)
	return func(o *app.Options) {
		o.DeviceTaints = true
		o.DeviceTaintRuleMaxPods = maxPods
	}
}

// deleteAtEnd deletes a cluster-scoped object the test made when it ends.
func (h *harness) deleteAtEnd(kind, name string, del func(context.Context, string, metav1.DeleteOptions) error) {
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := del(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			h.t.Errorf("deleting %s %s: %v", kind, name, err)
		}
	})
}

// slice publishes pool (one ResourceSlice named after it, generation 1)
// of node's devices, untainted.
func (h *harness) slice(pool, node string, devices ...string) {
	h.t.Helper()
	_, err := testenv.CreateResourceSlice(h.ctx, h.c, testenv.NewResourceSlice(pool, gpuDriver, pool, node, devices...))
	require.NoError(h.t, err)
	h.deleteAtEnd("ResourceSlice", pool, h.c.ResourceV1().ResourceSlices().Delete)
}

// devicePod is a pod of the tests: bound to node (with a PodScheduled
// time), its claim allocated pool's device with the request's tolerations,
// and changed by configure before it is created. It returns the pod as
// stored.
func (h *harness) devicePod(name, node, pool, device string, tolerations []resourcev1.DeviceToleration, configure ...func(*corev1.Pod)) *corev1.Pod {
	h.t.Helper()
	p, err := testenv.CreateClaimedPod(h.ctx, h.c, testenv.ClaimedPodSpec{
		Namespace: h.ns, Name: name, Node: node, Bind: true,
		Device:      testenv.DeviceID{Driver: gpuDriver, Pool: pool, Device: device},
		Tolerations: tolerations,
		Pod: func(p *corev1.Pod) {
			for _, f := range configure {
				f(p)
			}
		},
	})
	require.NoError(h.t, err)
	return p.Pod
}

// brokenTaint is the tests' NoExecute device taint.
func brokenTaint() resourcev1.DeviceTaint { return testenv.NoExecuteDeviceTaint(brokenKey, "true") }

// tolerateBroken tolerates brokenTaint for d (whole seconds) with effect
// ("" tolerates every effect).
func tolerateBroken(d time.Duration, effect resourcev1.DeviceTaintEffect) []resourcev1.DeviceToleration {
	return []resourcev1.DeviceToleration{{Key: brokenKey, Operator: resourcev1.DeviceTolerationOpExists, Effect: effect, TolerationSeconds: seconds(d)}}
}

// rule creates the DeviceTaintRule named after the test's namespace and
// suffix, and returns it as stored (with its taint's TimeAdded).
func (h *harness) rule(suffix string, sel resourcev1.DeviceTaintSelector, taint resourcev1.DeviceTaint) *resourcev1.DeviceTaintRule {
	h.t.Helper()
	r, err := testenv.CreateDeviceTaintRule(h.ctx, h.c, h.ns+"-"+suffix, &sel, taint)
	require.NoError(h.t, err)
	h.deleteAtEnd("DeviceTaintRule", r.Name, h.c.ResourceV1().DeviceTaintRules().Delete)
	require.NotNil(h.t, r.Spec.Taint.TimeAdded, "the server sets a rule's TimeAdded")
	return r
}

// evictionOf returns the oracle's record of the pod named name's removal.
func evictionOf(t *testing.T, rep *oracle.Report, name string) oracle.Eviction {
	t.Helper()
	i := slices.IndexFunc(rep.Evictions, func(e oracle.Eviction) bool { return e.Name == name })
	require.GreaterOrEqual(t, i, 0, "the oracle saw no removal of %s: %+v", name, rep.Evictions)
	return rep.Evictions[i]
}

// assertHeldOnce checks that the oracle held rule once, for pods over
// limit, and released it before the record's end.
func assertHeldOnce(t *testing.T, rep *oracle.Report, rule *resourcev1.DeviceTaintRule, pods, limit int) {
	t.Helper()
	if assert.Len(t, rep.HeldRules, 1, "the oracle's held rules") {
		assert.Regexp(t, fmt.Sprintf(`^rule %s held from \S+ \(%d pods over a limit of %d\) to \d`, regexp.QuoteMeta(rule.Name), pods, limit), rep.HeldRules[0])
	}
}

// ruleTaint is how the oracle names rule's taint of device on an eviction.
func ruleTaint(pool, device string, rule *resourcev1.DeviceTaintRule) string {
	return fmt.Sprintf("device %s/%s/%s %s:%s (rule %s)", gpuDriver, pool, device, rule.Spec.Taint.Key, rule.Spec.Taint.Effect, rule.Name)
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
