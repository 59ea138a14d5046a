package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// timeout bounds each test against the real server; every step takes
// milliseconds, so reaching it means a step never happened.
const timeout = 30 * time.Second

// setup returns the shared Env, its admin client and a context that ends
// after timeout, having created namespace unless it is empty.
func setup(t *testing.T, namespace string) (*testenv.Env, kubernetes.Interface, context.Context) {
	t.Helper()
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	c := env.Client()
	if namespace != "" {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return env, c, ctx
}

func startFinaliser(t *testing.T, ctx context.Context, c kubernetes.Interface, namespace string) {
	t.Helper()
	f, err := testenv.StartPodFinaliser(ctx, c, namespace)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.Stop(), "a deletion failed") })
}

// A pod's life as the controller's tests see it: a tainted node, a pod the
// scheduler bound, the kubelet reporting it ready, a deletion that the
// kubelet stand-in completes.
func TestPodLifecycle(t *testing.T) {
	_, c, ctx := setup(t, "lifecycle")

	taint := testenv.NoExecuteTaint("example.com/maintenance", "true")
	node, err := testenv.CreateNode(ctx, c, "lifecycle-node", taint)
	require.NoError(t, err)
	require.Len(t, node.Spec.Taints, 1, "admission's not-ready taint is removed: %v", node.Spec.Taints)
	assert.Equal(t, taint.Key, node.Spec.Taints[0].Key)
	require.NotNil(t, node.Spec.Taints[0].TimeAdded)
	assert.True(t, taint.TimeAdded.Equal(node.Spec.Taints[0].TimeAdded), "stored TimeAdded %v, sent %v", node.Spec.Taints[0].TimeAdded, taint.TimeAdded)

	before := time.Now().Truncate(time.Second)
	pod, err := testenv.CreateBoundPod(ctx, c, testenv.NewPod("lifecycle", "web"), node.Name)
	require.NoError(t, err)
	assert.Equal(t, node.Name, pod.Spec.NodeName)
	scheduled := condition(pod, corev1.PodScheduled)
	require.NotNil(t, scheduled, "PodScheduled after binding")
	assert.Equal(t, corev1.ConditionTrue, scheduled.Status)
	assert.False(t, scheduled.LastTransitionTime.Time.Before(before), "PodScheduled at %v, bound after %v", scheduled.LastTransitionTime, before)

	pod, err = testenv.MarkPodReady(ctx, c, pod.Namespace, pod.Name)
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	require.NotNil(t, condition(pod, corev1.PodReady))
	assert.Equal(t, corev1.ConditionTrue, condition(pod, corev1.PodReady).Status)
	assert.Equal(t, scheduled.LastTransitionTime, condition(pod, corev1.PodScheduled).LastTransitionTime, "PodScheduled kept its time")

	// Without a kubelet the deletion stops at a deletionTimestamp.
	require.NoError(t, c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	terminating, err := testenv.WaitForPod(ctx, c, pod.Namespace, pod.Name, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	require.NoError(t, err)
	assert.Equal(t, pod.UID, terminating.UID)
	_, err = c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err, "a bound pod stays until the finaliser runs")

	start := time.Now()
	startFinaliser(t, ctx, c, pod.Namespace)
	gone, err := testenv.WaitForPodDeleted(ctx, c, pod.Namespace, pod.Name, pod.UID)
	require.NoError(t, err)
	assert.False(t, gone.Before(start), "deletion observed at %v, before the finaliser started at %v", gone, start)
	_, err = c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "get after deletion: %v", err)
}

// A pod created with spec.nodeName never went through the scheduler.
func TestCreatePodOnNodeHasNoPodScheduled(t *testing.T) {
	_, c, ctx := setup(t, "direct")
	_, err := testenv.CreateNode(ctx, c, "direct-node")
	require.NoError(t, err)

	pod, err := testenv.CreatePodOnNode(ctx, c, testenv.NewPod("direct", "p"), "direct-node")
	require.NoError(t, err)
	assert.Equal(t, "direct-node", pod.Spec.NodeName)
	assert.Nil(t, condition(pod, corev1.PodScheduled))
	// Admission's default tolerations, which every test pod carries.
	assert.Contains(t, tolerationKeys(pod), corev1.TaintNodeNotReady)
	assert.Contains(t, tolerationKeys(pod), corev1.TaintNodeUnreachable)
}

func TestTaintAndUntaintNode(t *testing.T) {
	_, c, ctx := setup(t, "")
	untimed := corev1.Taint{Key: "example.com/untimed", Effect: corev1.TaintEffectNoExecute}
	_, err := testenv.CreateNode(ctx, c, "taints-node", untimed)
	require.NoError(t, err)

	first := testenv.NoExecuteTaint("example.com/t", "a")
	_, err = testenv.TaintNode(ctx, c, "taints-node", first)
	require.NoError(t, err)
	second := testenv.NoExecuteTaint("example.com/t", "b")
	node, err := testenv.TaintNode(ctx, c, "taints-node", second)
	require.NoError(t, err)
	require.Len(t, node.Spec.Taints, 2, "same key and effect replaced: %v", node.Spec.Taints)
	assert.Nil(t, node.Spec.Taints[0].TimeAdded, "a taint sent without TimeAdded stays without")
	assert.Equal(t, "b", node.Spec.Taints[1].Value)

	node, err = testenv.UntaintNode(ctx, c, "taints-node", "example.com/t", corev1.TaintEffectNoExecute)
	require.NoError(t, err)
	assert.Equal(t, []corev1.Taint{untimed}, node.Spec.Taints)
}

// The server enforces RBAC on an impersonated ServiceAccount, and the rules
// that ApplyManifests writes take effect.
func TestRBACEnforcedOnServiceAccount(t *testing.T) {
	env, _, ctx := setup(t, "rbac")

	sa, err := kubernetes.NewForConfig(env.ImpersonatedConfig("rbac", "reader"))
	require.NoError(t, err)
	_, err = sa.CoreV1().Pods("rbac").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "listing pods without a role: got %v, want Forbidden", err)

	_, err = env.ApplyManifests(ctx, "testdata/reader.yaml")
	require.NoError(t, err)
	require.NoError(t, testenv.WaitForAccess(ctx, env.ImpersonatedConfig("rbac", "reader"),
		authorizationv1.ResourceAttributes{Namespace: "rbac", Verb: "list", Resource: "pods"}))
	_, err = sa.CoreV1().Pods("rbac").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "listing pods with the Role bound")
	err = sa.CoreV1().Pods("rbac").Delete(ctx, "any", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting a pod, which the Role does not allow: got %v, want Forbidden", err)
	_, err = sa.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "listing pods in another namespace: got %v, want Forbidden", err)
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func tolerationKeys(pod *corev1.Pod) []string {
	var keys []string
	for _, tol := range pod.Spec.Tolerations {
		keys = append(keys, tol.Key)
	}
	return keys
}
