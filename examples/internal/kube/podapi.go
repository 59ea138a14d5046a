package kube

import (
	"context"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodAPI sends a [PodClient]'s three requests: a strategic merge patch of
// pods/status, a DELETE of a pod, and a create of pods/eviction. Make one
// with [ClientsetAPI] or [ControllerRuntimeAPI].
type PodAPI interface {
	patchStatus(ctx context.Context, namespace, name string, patch []byte) error
	delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	evict(ctx context.Context, eviction *policyv1.Eviction) error
}

// ClientsetAPI returns a PodAPI that sends the requests with c.
func ClientsetAPI(c kubernetes.Interface) PodAPI { return clientsetAPI{c} }

type clientsetAPI struct{ c kubernetes.Interface }

func (a clientsetAPI) patchStatus(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := a.c.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func (a clientsetAPI) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return a.c.CoreV1().Pods(namespace).Delete(ctx, name, opts)
}

func (a clientsetAPI) evict(ctx context.Context, eviction *policyv1.Eviction) error {
	// client-go retries a 429 that carries Retry-After, up to 10 times,
	// inside the call: a budget whose status is stale ("still being
	// processed", Retry-After: 10) would hold an eviction slot for some 100 s.
	// The manager retries refusals itself, on its clock and holding no slot,
	// so ask once.
	if rc, ok := a.c.PolicyV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		req := rc.Post().MaxRetries(0).AbsPath("/api/v1") // where the typed Evict posts
		req = req.Namespace(eviction.Namespace).Resource("pods").Name(eviction.Name).SubResource("eviction")
		return req.Body(eviction).Do(ctx).Error()
	}
	// A fake clientset has no REST client: its typed call is the same request.
	return a.c.PolicyV1().Evictions(eviction.Namespace).Evict(ctx, eviction)
}

// ControllerRuntimeAPI returns a PodAPI that sends the requests with c, a
// controller-runtime manager's client (so that its interceptors see them).
func ControllerRuntimeAPI(c client.Client) PodAPI { return controllerRuntimeAPI{c} }

type controllerRuntimeAPI struct{ c client.Client }

func pod(namespace, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func (a controllerRuntimeAPI) patchStatus(ctx context.Context, namespace, name string, patch []byte) error {
	return a.c.Status().Patch(ctx, pod(namespace, name), client.RawPatch(types.StrategicMergePatchType, patch))
}

func (a controllerRuntimeAPI) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	// Not as client.DeleteOptions.Raw: the client overwrites Raw's
	// preconditions, grace period and policy with its own fields.
	return a.c.Delete(ctx, pod(namespace, name), &client.DeleteOptions{GracePeriodSeconds: opts.GracePeriodSeconds,
		Preconditions: opts.Preconditions, PropagationPolicy: opts.PropagationPolicy, DryRun: opts.DryRun})
}

func (a controllerRuntimeAPI) evict(ctx context.Context, eviction *policyv1.Eviction) error {
	return a.c.SubResource("eviction").Create(ctx, pod(eviction.Namespace, eviction.Name), eviction)
}
