package binary_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// The leader is killed (SIGKILL) in the middle of a pod's 10 s countdown
// on a device taint, a DeviceTaintRule's that the pod's claim tolerates
// for 10 s: the other replica, which watched the DRA objects too, takes
// the lease over and deletes the pod at TimeAdded + 10 s, not 10 s after
// it took over; the oracle judges the deadline from its own model of
// device taints.
func TestLeaderKilledDuringDeviceCountdown(t *testing.T) {
	const driver = "gpu.example.com"
	var taint string // as the oracle names the rule's taint on the device
	rep := killLeaderDuringCountdown(t, "handover-device", []string{"--device-taints"}, func(e *env) { applyDeviceRBAC(t, e) }, func(e *env, ns string) (*corev1.Pod, time.Time) {
		node, err := testenv.CreateNode(e.ctx, e.c, ns+"-node")
		require.NoError(t, err)
		deleteAtEnd(t, "Node", node.Name, e.c.CoreV1().Nodes().Delete)
		slice, err := testenv.CreateResourceSlice(e.ctx, e.c, testenv.NewResourceSlice(ns, driver, ns, node.Name, "gpu-0"))
		require.NoError(t, err)
		deleteAtEnd(t, "ResourceSlice", slice.Name, e.c.ResourceV1().ResourceSlices().Delete)
		p, err := testenv.CreateClaimedPod(e.ctx, e.c, testenv.ClaimedPodSpec{
			Namespace: ns, Name: "counting-down", Node: node.Name, Bind: true,
			Device: testenv.DeviceID{Driver: driver, Pool: ns, Device: "gpu-0"},
			Tolerations: []resourcev1.DeviceToleration{{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpExists,
				Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: ptr.To(int64(killedToleration / time.Second))}},
		})
		require.NoError(t, err)
		pool := ns
		rule, err := testenv.CreateDeviceTaintRule(e.ctx, e.c, ns, &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver), Pool: &pool},
			testenv.NoExecuteDeviceTaint("example.com/broken", "true"))
		require.NoError(t, err)
		deleteAtEnd(t, "DeviceTaintRule", rule.Name, e.c.ResourceV1().DeviceTaintRules().Delete)
		taint = fmt.Sprintf("device %s/%s/gpu-0 example.com/broken:NoExecute (rule %s)", driver, pool, rule.Name)
		return p.Pod, latest(rule.Spec.Taint.TimeAdded.Time, p.Pod)
	})
	if len(rep.Evictions) == 1 {
		assert.Equal(t, taint, rep.Evictions[0].Taint, "the oracle's taint that made the pod due")
	}
}

// applyDeviceRBAC applies the device-taints component's RBAC and waits
// until the ServiceAccount may use it.
func applyDeviceRBAC(t *testing.T, e *env) {
	t.Helper()
	_, err := e.ApplyManifests(e.ctx, "../../deploy/components/device-taints/rbac.yaml")
	require.NoError(t, err)
	sa := e.ImpersonatedConfig(saNamespace, saName)
	for _, r := range []string{"resourceslices", "resourceclaims", "devicetaintrules"} {
		require.NoError(t, testenv.WaitForAccess(e.ctx, sa, authorizationv1.ResourceAttributes{Verb: "watch", Group: resourcev1.GroupName, Resource: r}))
	}
	require.NoError(t, testenv.WaitForAccess(e.ctx, sa, authorizationv1.ResourceAttributes{
		Verb: "patch", Group: resourcev1.GroupName, Resource: "devicetaintrules", Subresource: "status"}))
}

// deleteAtEnd deletes a cluster-scoped object the test made when it ends.
func deleteAtEnd(t *testing.T, kind, name string, del func(context.Context, string, metav1.DeleteOptions) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := del(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s: %v", kind, name, err)
		}
	})
}
