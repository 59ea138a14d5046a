package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

var (
	_ manager.PodClient  = (*PodClient)(nil)
	_ manager.PodEvicter = (*PodClient)(nil)
)

// PodClient is the manager's [manager.PodClient] and [manager.PodEvicter].
// It needs the RBAC verbs patch on pods/status and delete on pods, and
// create on pods/eviction for [PodClient.EvictPod].
//
// It is safe for concurrent use by multiple goroutines if GetPod and
// BeforeDelete are.
type PodClient struct {
	// API sends the requests. Required.
	API PodAPI
	// GetPod, if not nil, returns the pod namespace/name from a cache (an
	// informer's). It is read for the pod's current conditions, to keep the
	// transition time of a condition that does not change, and for the pod
	// given to BeforeDelete; the pod it returns is not changed.
	GetPod func(namespace, name string) (*v1.Pod, error)
	// BeforeDelete, if not nil, is called right before each DELETE and
	// each eviction with a copy of the pod (from GetPod, or one that holds
	// only its namespace, name and precondition UID). Tests use it to
	// change the pod at the worst moment.
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
		return fmt.Errorf("kube: marshal status patch of pod %s/%s: %w", namespace, name, err)
	}
	err = c.API.PatchStatus(ctx, namespace, name, data)
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
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
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
	return c.API.Delete(ctx, namespace, name, opts)
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
	return c.API.Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: namespace, Name: name},
		DeleteOptions: &opts,
	})
}

func (c *PodClient) cachedCondition(namespace, name string, uid types.UID, t v1.PodConditionType) (v1.PodCondition, bool) {
	if c.GetPod == nil {
		return v1.PodCondition{}, false
	}
	pod, err := c.GetPod(namespace, name)
	if err != nil || pod == nil || (uid != "" && pod.UID != uid) {
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
	if c.GetPod != nil {
		if pod, err := c.GetPod(namespace, name); err == nil && pod != nil {
			return pod.DeepCopy()
		}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		pod.UID = *opts.Preconditions.UID
	}
	return pod
}
