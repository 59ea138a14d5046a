package app

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

var (
	_ manager.PodClient  = (*PodClient)(nil)
	_ manager.PodEvicter = (*PodClient)(nil)
)

// PodClient is the manager's [manager.PodClient] and [manager.PodEvicter]
// on a clientset. It needs the RBAC verbs patch on pods/status and delete
// on pods, and create on pods/eviction for [PodClient.EvictPod].
//
// It is safe for concurrent use by multiple goroutines if BeforeDelete is.
type PodClient struct {
	// Client makes the API calls. Required.
	Client kubernetes.Interface
	// Pods, if not nil, is read for the pod's current conditions (to keep
	// the transition time of a condition that does not change) and for the
	// pod given to BeforeDelete.
	Pods corelisters.PodLister
	// BeforeDelete, if not nil, is called right before each DELETE and
	// each eviction: see [Options.BeforeDelete].
	BeforeDelete func(ctx context.Context, pod *v1.Pod)
}

// SetPodCondition sets cond on the pod's status with a strategic merge
// patch of pods/status that replaces the condition of the same type. A
// zero LastTransitionTime becomes now, or stays the cached condition's if
// its status does not change.
//
// A non-empty uid goes into the patch as metadata.uid: the API server then
// refuses to patch another pod of the same name (422 Invalid, "field is
// immutable"), which SetPodCondition returns as a 409 Conflict error, as
// the manager's PodClient contract asks.
func (c *PodClient) SetPodCondition(ctx context.Context, namespace, name string, uid types.UID, cond v1.PodCondition) error {
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.Now()
		if old, ok := c.cachedCondition(namespace, name, uid, cond.Type); ok && old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
	}
	patch := struct {
		Metadata *uidOnly `json:"metadata,omitempty"`
		Status   struct {
			Conditions []v1.PodCondition `json:"conditions"`
		} `json:"status"`
	}{}
	if uid != "" {
		patch.Metadata = &uidOnly{UID: uid}
	}
	patch.Status.Conditions = []v1.PodCondition{cond}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("app: marshal status patch of pod %s/%s: %w", namespace, name, err)
	}
	_, err = c.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status")
	if uid != "" && isUIDMismatch(err) {
		return apierrors.NewConflict(v1.Resource("pods"), name,
			fmt.Errorf("the pod is no longer the one with UID %s: %w", uid, err))
	}
	return err
}

type uidOnly struct {
	UID types.UID `json:"uid"`
}

// isUIDMismatch reports whether err is the API server's refusal of a patch
// whose metadata.uid is not the object's.
func isUIDMismatch(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// DeletePod deletes the pod with opts (the manager sets a UID
// precondition, which the API server checks: a mismatch is a 409 Conflict
// and deletes nothing). It calls BeforeDelete first.
func (c *PodClient) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if c.BeforeDelete != nil {
		c.BeforeDelete(ctx, c.podForHook(namespace, name, opts))
	}
	return c.Client.CoreV1().Pods(namespace).Delete(ctx, name, opts)
}

// EvictPod evicts the pod through the Eviction API: it creates a policy/v1
// Eviction of the pod with opts as its DeleteOptions (the manager sets a
// UID precondition, which the API server checks: a mismatch is a 409
// Conflict and evicts nothing). It calls BeforeDelete first.
//
// The API server honours the pod's PodDisruptionBudgets: when one allows
// no disruption it answers 429 TooManyRequests with a cause of type
// DisruptionBudget, which [manager.IsRefusedByBudget] recognises, and the
// pod stays. When it evicts, it sets the pod's DisruptionTarget condition
// (reason EvictionByEvictionAPI) and deletes the pod with the pod's own
// grace period.
func (c *PodClient) EvictPod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	if c.BeforeDelete != nil {
		c.BeforeDelete(ctx, c.podForHook(namespace, name, opts))
	}
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: namespace, Name: name},
		DeleteOptions: &opts,
	}
	// client-go retries a 429 that carries Retry-After, up to 10 times,
	// inside the call: a budget whose status is stale ("still being
	// processed", Retry-After: 10) would hold an eviction slot for some 100 s.
	// The manager retries refusals itself, on its clock and holding no slot,
	// so ask once.
	if rc, ok := c.Client.PolicyV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		req := rc.Post().MaxRetries(0).AbsPath("/api/v1") // where the typed Evict posts
		req = req.Namespace(namespace).Resource("pods").Name(name).SubResource("eviction")
		return req.Body(eviction).Do(ctx).Error()
	}
	// A fake clientset has no REST client: its typed call is the same request.
	return c.Client.PolicyV1().Evictions(namespace).Evict(ctx, eviction)
}

func (c *PodClient) cachedCondition(namespace, name string, uid types.UID, t v1.PodConditionType) (v1.PodCondition, bool) {
	if c.Pods == nil {
		return v1.PodCondition{}, false
	}
	pod, err := c.Pods.Pods(namespace).Get(name)
	if err != nil || (uid != "" && pod.UID != uid) {
		return v1.PodCondition{}, false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == t {
			return cond, true
		}
	}
	return v1.PodCondition{}, false
}

func (c *PodClient) podForHook(namespace, name string, opts metav1.DeleteOptions) *v1.Pod {
	if c.Pods != nil {
		if pod, err := c.Pods.Pods(namespace).Get(name); err == nil {
			return pod.DeepCopy()
		}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		pod.UID = *opts.Preconditions.UID
	}
	return pod
}
