package testenv_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

var deviceRuns atomic.Int64

// The DRA objects the device-taint tests need, as the real API server
// accepts and stores them: a driver's slice with a tainted device, a claim
// allocated and reserved for a pod that uses it, a rule, and their writes on
// the audit log.
func TestDeviceObjects(t *testing.T) {
	// Names of their own for each run (go test -count).
	run := fmt.Sprint(deviceRuns.Add(1))
	ns, node := "devices-"+run, "devices-node-"+run
	env, c, ctx := setup(t, ns)
	dev := testenv.DeviceID{Driver: "gpu.example.com", Pool: node, Device: "gpu-0"}
	// The oracle's watches list and watch the DRA objects.
	o, err := oracle.Start(ctx, oracle.Options{Client: c, AuditLog: env.AuditLogPath(), Namespace: ns})
	require.NoError(t, err)
	_, err = testenv.CreateNode(ctx, c, node)
	require.NoError(t, err)

	before := time.Now().Truncate(time.Second)
	slice, err := testenv.CreateResourceSlice(ctx, c, testenv.NewResourceSlice("devices-slice-"+run, dev.Driver, dev.Pool, node, "gpu-0", "gpu-1"))
	require.NoError(t, err)
	assert.Len(t, slice.Spec.Devices, 2)
	slice, err = testenv.TaintDevice(ctx, c, slice.Name, "gpu-0", testenv.NoExecuteDeviceTaint("example.com/failing", "true"))
	require.NoError(t, err)
	require.Len(t, slice.Spec.Devices[0].Taints, 1)
	taint := slice.Spec.Devices[0].Taints[0]
	require.NotNil(t, taint.TimeAdded, "the server sets a slice taint's TimeAdded")
	assert.False(t, taint.TimeAdded.Before(&metav1.Time{Time: before}), "TimeAdded %v, tainted after %v", taint.TimeAdded, before)

	tolerations := []resourcev1.DeviceToleration{{Key: "example.com/failing", Operator: resourcev1.DeviceTolerationOpExists, TolerationSeconds: ptr.To[int64](8)}}
	for _, bind := range []bool{true, false} {
		name := map[bool]string{true: "bound", false: "on-node"}[bind]
		p, err := testenv.CreateClaimedPod(ctx, c, testenv.ClaimedPodSpec{
			Namespace: ns, Name: name, Node: node, Bind: bind, Device: dev, Tolerations: tolerations,
		})
		require.NoError(t, err, name)
		assert.Equal(t, node, p.Pod.Spec.NodeName)
		require.Len(t, p.Pod.Spec.ResourceClaims, 1)
		assert.Equal(t, p.Claim.Name, *p.Pod.Spec.ResourceClaims[0].ResourceClaimName)
		require.NotNil(t, p.Claim.Status.Allocation, name)
		assert.Equal(t, []resourcev1.DeviceRequestAllocationResult{{
			Request: testenv.ClaimRequest, Driver: dev.Driver, Pool: dev.Pool, Device: dev.Device, Tolerations: tolerations,
		}}, p.Claim.Status.Allocation.Devices.Results)
		assert.Equal(t, []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Pod.Name, UID: p.Pod.UID}}, p.Claim.Status.ReservedFor)
	}

	// An allocation cannot change: deallocate, then allocate again.
	pod, err := c.CoreV1().Pods(ns).Get(ctx, "bound", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = testenv.AllocateClaim(ctx, c, ns, "bound-claim", pod, testenv.DeviceID{Driver: dev.Driver, Pool: dev.Pool, Device: "gpu-1"})
	require.Error(t, err, "an allocation changed in place")
	claim, err := testenv.DeallocateClaim(ctx, c, ns, "bound-claim")
	require.NoError(t, err)
	assert.Nil(t, claim.Status.Allocation)
	claim, err = testenv.AllocateClaim(ctx, c, ns, "bound-claim", pod, testenv.DeviceID{Driver: dev.Driver, Pool: dev.Pool, Device: "gpu-1"})
	require.NoError(t, err)
	assert.Equal(t, "gpu-1", claim.Status.Allocation.Devices.Results[0].Device)

	rule, err := testenv.CreateDeviceTaintRule(ctx, c, "devices-rule-"+run, &resourcev1.DeviceTaintSelector{Driver: &dev.Driver, Pool: &dev.Pool},
		resourcev1.DeviceTaint{Key: "example.com/upgrade", Effect: resourcev1.DeviceTaintEffectNone})
	require.NoError(t, err)
	require.NotNil(t, rule.Spec.Taint.TimeAdded, "the server sets a rule taint's TimeAdded")
	assert.False(t, rule.Spec.Taint.TimeAdded.Before(&metav1.Time{Time: before}))
	added := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	rule, err = testenv.UpdateDeviceTaintRule(ctx, c, rule.Name, func(s *resourcev1.DeviceTaintRuleSpec) { s.Taint.TimeAdded = &added })
	require.NoError(t, err)
	assert.True(t, added.Equal(rule.Spec.Taint.TimeAdded), "an update may set TimeAdded: %v", rule.Spec.Taint.TimeAdded)
	// A new effect with the same TimeAdded: the server stamps it now.
	rule, err = testenv.UpdateDeviceTaintRule(ctx, c, rule.Name, func(s *resourcev1.DeviceTaintRuleSpec) {
		s.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	})
	require.NoError(t, err)
	assert.True(t, rule.Spec.Taint.TimeAdded.After(added.Time), "a new effect is a new TimeAdded: %v, was %v", rule.Spec.Taint.TimeAdded, added)
	rule.Status.Conditions = []metav1.Condition{{
		Type: resourcev1.DeviceTaintConditionEvictionInProgress, Status: metav1.ConditionFalse, Reason: "TooManyPods",
		Message: "3 pods would be evicted, more than the limit of 2", ObservedGeneration: rule.Generation, LastTransitionTime: metav1.Now(),
	}}
	_, err = c.ResourceV1().DeviceTaintRules().UpdateStatus(ctx, rule, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.ResourceV1().DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}))
	require.NoError(t, c.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{}))

	// Nothing the oracle judges: no controller ran, and no pod is due yet.
	rep := o.Verify(t)
	assert.Empty(t, rep.Evictions)

	// The API server does not check that a claim's DeviceClass exists (the
	// scheduler does): CreateClaim creates it for the scheduler's sake.
	_, err = c.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "classless"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "absent"},
		}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The audit log has the DRA writes, the rule's status with its body
	// (other tests' writes are on it too).
	levels := map[string]string{}
	f, err := os.Open(env.AuditLogPath())
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev struct {
			Level     string
			Verb      string
			ObjectRef *struct{ APIGroup, Resource, Subresource, Name string }
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.APIGroup != "resource.k8s.io" {
			continue
		}
		r := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			r += "/" + ev.ObjectRef.Subresource
		}
		levels[ev.Verb+" "+r] = ev.Level
	}
	require.NoError(t, sc.Err())
	for call, level := range map[string]string{
		"create deviceclasses":           "Metadata",
		"create resourceslices":          "Metadata",
		"update resourceslices":          "Metadata",
		"delete resourceslices":          "Metadata",
		"create resourceclaims":          "Metadata",
		"update resourceclaims/status":   "Metadata",
		"create devicetaintrules":        "Metadata",
		"update devicetaintrules":        "Metadata",
		"update devicetaintrules/status": "Request",
		"delete devicetaintrules":        "Metadata",
	} {
		assert.Equal(t, level, levels[call], call)
	}
}

// The component device-taints' RBAC, applied with deploy/'s, allows the
// controller's ServiceAccount the calls --device-taints makes, on the real
// server, and no update of a rule's status (the controller patches it).
func TestDeviceTaintsRBAC(t *testing.T) {
	env, c, ctx := setup(t, "")
	_, err := env.ApplyManifests(ctx, "../../deploy/serviceaccount.yaml", "../../deploy/rbac.yaml",
		"../../deploy/components/device-taints/rbac.yaml")
	require.NoError(t, err)
	cfg := env.ImpersonatedConfig("kube-system", "taintkit-noexecute")
	require.NoError(t, testenv.WaitForAccess(ctx, cfg, authorizationv1.ResourceAttributes{
		Verb: "patch", Group: resourcev1.GroupName, Resource: "devicetaintrules", Subresource: "status",
	}))
	sa, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	run := fmt.Sprint(deviceRuns.Add(1))
	rule, err := testenv.CreateDeviceTaintRule(ctx, c, "rbac-rule-"+run, nil, resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNone})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.ResourceV1().DeviceTaintRules().Delete(context.Background(), rule.Name, metav1.DeleteOptions{})
	})

	r := sa.ResourceV1()
	_, err = r.ResourceSlices().List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "list resourceslices")
	_, err = r.DeviceTaintRules().List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "list devicetaintrules")
	_, err = r.ResourceClaims("").List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "list resourceclaims in every namespace")
	for name, watch := range map[string]func() (watch.Interface, error){
		"resourceslices":   func() (watch.Interface, error) { return r.ResourceSlices().Watch(ctx, metav1.ListOptions{}) },
		"devicetaintrules": func() (watch.Interface, error) { return r.DeviceTaintRules().Watch(ctx, metav1.ListOptions{}) },
		"resourceclaims":   func() (watch.Interface, error) { return r.ResourceClaims("").Watch(ctx, metav1.ListOptions{}) },
	} {
		w, err := watch()
		if assert.NoError(t, err, "watch %s", name) {
			w.Stop()
		}
	}
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"False","reason":"NoEffect","message":"no effect","lastTransitionTime":%q}]}}`,
		resourcev1.DeviceTaintConditionEvictionInProgress, time.Now().UTC().Format(time.RFC3339))
	_, err = r.DeviceTaintRules().Patch(ctx, rule.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	assert.NoError(t, err, "patch devicetaintrules/status")
	_, err = r.DeviceTaintRules().UpdateStatus(ctx, rule, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "update devicetaintrules/status: got %v, want Forbidden", err)
	ev, err := sa.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "rule-"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "resource.k8s.io/v1", Kind: "DeviceTaintRule", Name: rule.Name, UID: rule.UID},
		Reason:         "DeviceTaintManagerEviction", Message: "a test", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	if assert.NoError(t, err, "create an event in default") {
		// The controller only creates events (its event sink has no
		// aggregation), and is granted nothing more.
		_, err = sa.CoreV1().Events(metav1.NamespaceDefault).Patch(ctx, ev.Name, types.StrategicMergePatchType, []byte(`{"count":2}`), metav1.PatchOptions{})
		assert.True(t, apierrors.IsForbidden(err), "patch an event in default: got %v, want Forbidden", err)
	}
}
