package kube_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/tolerations"
)

var disruptionTarget = v1.PodCondition{
	Type:    v1.DisruptionTarget,
	Status:  v1.ConditionTrue,
	Reason:  tolerations.ReasonDeletionByTaintManager,
	Message: "Taint manager: deleting due to NoExecute taint",
}

func uidPtr(uid types.UID) *types.UID { return &uid }

// What the manager does to evict a pod: condition, then delete with the
// UID it read.
func TestPodClientSetsConditionThenDeletesWithUID(t *testing.T) {
	ctx := t.Context()
	client := kubetest.NewClientset(kubetest.Pod("web", "uid-1"))
	c := &kube.PodClient{API: kube.ClientsetAPI(client)}

	require.NoError(t, c.SetPodCondition(ctx, "default", "web", "uid-1", disruptionTarget))
	pod, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, pod.Status.Conditions, 1)
	got := pod.Status.Conditions[0]
	assert.Equal(t, v1.DisruptionTarget, got.Type)
	assert.Equal(t, v1.ConditionTrue, got.Status)
	assert.Equal(t, "DeletionByTaintManager", got.Reason)
	assert.False(t, got.LastTransitionTime.IsZero(), "LastTransitionTime is set")

	require.NoError(t, c.DeletePod(ctx, "default", "web", metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: uidPtr("uid-1")},
	}))
	_, err = client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "pod deleted, got %v", err)

	// The requests: a strategic merge patch of pods/status carrying the UID
	// as a precondition, then a DELETE with the UID precondition.
	var verbs []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			continue
		}
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		switch a := a.(type) {
		case clienttesting.PatchAction:
			assert.Equal(t, types.StrategicMergePatchType, a.GetPatchType())
			var body struct {
				Metadata struct{ UID types.UID }
				Status   struct{ Conditions []v1.PodCondition }
			}
			require.NoError(t, json.Unmarshal(a.GetPatch(), &body))
			assert.Equal(t, types.UID("uid-1"), body.Metadata.UID)
			require.Len(t, body.Status.Conditions, 1)
			assert.Equal(t, v1.DisruptionTarget, body.Status.Conditions[0].Type)
		case clienttesting.DeleteAction:
			assert.Equal(t, types.UID("uid-1"), *a.GetDeleteOptions().Preconditions.UID)
		}
	}
	assert.Equal(t, []string{"patch pods/status", "delete pods/"}, verbs)
}

func TestPodClientNotFound(t *testing.T) {
	ctx := t.Context()
	c := &kube.PodClient{API: kube.ClientsetAPI(kubetest.NewClientset())}
	err := c.SetPodCondition(ctx, "default", "gone", "uid-1", disruptionTarget)
	assert.True(t, apierrors.IsNotFound(err), "SetPodCondition: want NotFound, got %v", err)
	err = c.DeletePod(ctx, "default", "gone", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: uidPtr("uid-1")}})
	assert.True(t, apierrors.IsNotFound(err), "DeletePod: want NotFound, got %v", err)
}

// A pod recreated under the same name is another pod: neither its status
// nor the pod itself may be touched for its predecessor.
func TestPodClientConflictOnRecreatedPod(t *testing.T) {
	ctx := t.Context()
	client := kubetest.NewClientset(kubetest.Pod("web", "uid-2")) // uid-1 was deleted and recreated
	c := &kube.PodClient{API: kube.ClientsetAPI(client)}

	err := c.SetPodCondition(ctx, "default", "web", "uid-1", disruptionTarget)
	assert.True(t, apierrors.IsConflict(err), "SetPodCondition: want Conflict, got %v", err)
	err = c.DeletePod(ctx, "default", "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: uidPtr("uid-1")}})
	assert.True(t, apierrors.IsConflict(err), "DeletePod: want Conflict, got %v", err)

	pod, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err, "the new pod is still there")
	assert.Empty(t, pod.Status.Conditions, "the new pod's status is untouched")
}

// fromCache returns a GetPod that reads pods from an informer's cache.
func fromCache(t *testing.T, pods ...*v1.Pod) func(namespace, name string) (*v1.Pod, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range pods {
		require.NoError(t, indexer.Add(p))
	}
	lister := corelisters.NewPodLister(indexer)
	return func(namespace, name string) (*v1.Pod, error) { return lister.Pods(namespace).Get(name) }
}

// A retry sets the same condition again: its transition time stays the
// first one, as a condition's transition time should.
func TestPodClientKeepsTransitionTimeOfUnchangedCondition(t *testing.T) {
	ctx := t.Context()
	first := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	pod := kubetest.Pod("web", "uid-1")
	cond := disruptionTarget
	cond.LastTransitionTime = first
	pod.Status.Conditions = []v1.PodCondition{cond}
	client := kubetest.NewClientset(pod)
	c := &kube.PodClient{API: kube.ClientsetAPI(client), GetPod: fromCache(t, pod)}

	require.NoError(t, c.SetPodCondition(ctx, "default", "web", "uid-1", disruptionTarget))
	got, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, got.Status.Conditions, 1)
	assert.True(t, got.Status.Conditions[0].LastTransitionTime.Equal(&first),
		"LastTransitionTime = %v, want %v", got.Status.Conditions[0].LastTransitionTime, first)
}

func TestPodClientBeforeDelete(t *testing.T) {
	ctx := t.Context()
	cached := kubetest.Pod("web", "uid-1")
	cached.Labels = map[string]string{"app": "web"}
	client := kubetest.NewClientset(cached)
	var hooked []*v1.Pod
	c := &kube.PodClient{
		API:    kube.ClientsetAPI(client),
		GetPod: fromCache(t, cached),
		BeforeDelete: func(_ context.Context, pod *v1.Pod) {
			hooked = append(hooked, pod)
			if pod.Name != "web" {
				return
			}
			// Nothing deleted yet when the hook runs.
			_, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			assert.NoError(t, err)
			pod.Labels["app"] = "changed" // a copy: the cache is not changed
		},
	}
	require.NoError(t, c.DeletePod(ctx, "default", "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: uidPtr("uid-1")}}))
	require.Len(t, hooked, 1)
	assert.Equal(t, types.UID("uid-1"), hooked[0].UID)
	assert.Equal(t, "web", cached.Labels["app"])

	// Not in the cache: the hook still learns the name and the UID.
	c.GetPod = fromCache(t)
	_ = c.DeletePod(ctx, "default", "other", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: uidPtr("uid-9")}})
	require.Len(t, hooked, 2)
	assert.Equal(t, "other", hooked[1].Name)
	assert.Equal(t, types.UID("uid-9"), hooked[1].UID)
}

// The hook is where the integration tests recreate a pod to see the API
// server refuse the delete.
func TestPodClientBeforeDeleteRecreatesPod(t *testing.T) {
	ctx := t.Context()
	client := kubetest.NewClientset(kubetest.Pod("web", "uid-1"))
	c := &kube.PodClient{
		API: kube.ClientsetAPI(client),
		BeforeDelete: func(ctx context.Context, pod *v1.Pod) {
			require.NoError(t, client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
			_, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, kubetest.Pod(pod.Name, "uid-2"), metav1.CreateOptions{})
			require.NoError(t, err)
		},
	}
	err := c.DeletePod(ctx, "default", "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: uidPtr("uid-1")}})
	assert.True(t, apierrors.IsConflict(err), "want Conflict, got %v", err)
	pod, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, types.UID("uid-2"), pod.UID)
}

func uidOptions(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: uidPtr(uid)}}
}

// EvictPod creates a policy/v1 Eviction on the pod's eviction subresource,
// carrying the manager's DeleteOptions; it sets no condition itself (the
// API server does when it evicts).
func TestPodClientEvictPod(t *testing.T) {
	ctx := t.Context()
	client := kubetest.NewClientset(kubetest.Pod("web", "uid-1"))
	var hooked []types.UID
	c := &kube.PodClient{API: kube.ClientsetAPI(client), BeforeDelete: func(_ context.Context, pod *v1.Pod) { hooked = append(hooked, pod.UID) }}

	require.NoError(t, c.EvictPod(ctx, "default", "web", uidOptions("uid-1")))
	_, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "pod evicted, got %v", err)
	assert.Equal(t, []types.UID{"uid-1"}, hooked, "BeforeDelete is called before an eviction too")

	var writes []clienttesting.Action
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			writes = append(writes, a)
		}
	}
	require.Len(t, writes, 1)
	create, ok := writes[0].(clienttesting.CreateAction)
	require.True(t, ok, "%T", writes[0])
	assert.Equal(t, "pods", create.GetResource().Resource)
	assert.Equal(t, "eviction", create.GetSubresource())
	assert.Equal(t, "default", create.GetNamespace())
	ev, ok := create.GetObject().(*policyv1.Eviction)
	require.True(t, ok, "%T", create.GetObject())
	assert.Equal(t, metav1.ObjectMeta{Namespace: "default", Name: "web"}, ev.ObjectMeta)
	require.NotNil(t, ev.DeleteOptions)
	assert.Equal(t, types.UID("uid-1"), *ev.DeleteOptions.Preconditions.UID)
}

func TestPodClientEvictPodNotFoundAndConflict(t *testing.T) {
	ctx := t.Context()
	client := kubetest.NewClientset(kubetest.Pod("web", "uid-2")) // uid-1 was deleted and recreated
	c := &kube.PodClient{API: kube.ClientsetAPI(client)}

	err := c.EvictPod(ctx, "default", "gone", uidOptions("uid-1"))
	assert.True(t, apierrors.IsNotFound(err), "want NotFound, got %v", err)
	err = c.EvictPod(ctx, "default", "web", uidOptions("uid-1"))
	assert.True(t, apierrors.IsConflict(err), "want Conflict, got %v", err)
	_, err = client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	assert.NoError(t, err, "the new pod is still there")
}

// A budget's 429 reaches the manager as a refusal; a 429 without the
// DisruptionBudget cause (API throttling) does not.
func TestPodClientEvictPodRefusedByBudget(t *testing.T) {
	ctx := t.Context()
	client := kubetest.NewClientset(kubetest.Pod("web", "uid-1"), kubetest.Pod("api", "uid-2"))
	kubetest.RefuseEvictions(client, func(_, name string) bool { return name == "web" })
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" && a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction).Name == "api" {
			return true, nil, apierrors.NewTooManyRequests("the server has received too many requests", 1)
		}
		return false, nil, nil
	})
	c := &kube.PodClient{API: kube.ClientsetAPI(client)}

	err := c.EvictPod(ctx, "default", "web", uidOptions("uid-1"))
	require.Error(t, err)
	assert.True(t, manager.IsRefusedByBudget(err), "a budget's refusal: %v", err)
	_, err = client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	assert.NoError(t, err, "a refused eviction leaves the pod")

	err = c.EvictPod(ctx, "default", "api", uidOptions("uid-2"))
	require.Error(t, err)
	assert.True(t, apierrors.IsTooManyRequests(err))
	assert.False(t, manager.IsRefusedByBudget(err), "throttling is not a budget's refusal: %v", err)
}
