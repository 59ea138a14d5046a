package noexecute

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

var (
	_ manager.PodClient  = podClient{}
	_ manager.PodEvicter = podClient{}
)

// podClient is the manager's write access to pods on a controller-runtime
// client: patch pods/status, delete pods, create pods/eviction.
type podClient struct{ c client.Client }

// SetPodCondition sets cond with a strategic merge patch of pods/status
// that carries metadata.uid: the API server refuses to patch another pod
// of the same name (422, "field is immutable"), which becomes the 409
// Conflict the manager's contract asks for.
func (p podClient) SetPodCondition(ctx context.Context, namespace, name string, uid types.UID, cond v1.PodCondition) error {
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.Now()
	}
	patch := map[string]any{"status": map[string]any{"conditions": []v1.PodCondition{cond}}}
	if uid != "" {
		patch["metadata"] = map[string]any{"uid": uid}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("noexecute: status patch of pod %s/%s: %w", namespace, name, err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err = p.c.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, data))
	if uid != "" && isUIDMismatch(err) {
		return apierrors.NewConflict(v1.Resource("pods"), name, fmt.Errorf("not the pod with UID %s: %w", uid, err))
	}
	return err
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

// DeletePod deletes the pod with opts, whose UID precondition the API
// server checks. (Not as client.DeleteOptions.Raw: the client overwrites
// Raw's preconditions, grace period and policy with its own fields.)
func (p podClient) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return p.c.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: opts.GracePeriodSeconds,
		Preconditions: opts.Preconditions, PropagationPolicy: opts.PropagationPolicy, DryRun: opts.DryRun})
}

// EvictPod creates a policy/v1 Eviction of the pod: the API server honours
// its PodDisruptionBudgets, refusing with a 429 that carries a
// DisruptionBudget cause.
func (p podClient) EvictPod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return p.c.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: pod.ObjectMeta, DeleteOptions: &opts})
}
