package kube

import (
	"context"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// PodAPI sends a [PodClient]'s three requests. Make one with
// [ClientsetAPI], or on a controller-runtime client with package kubecr's
// PodAPI (a package of its own, so that a binary on a clientset does not
// link controller-runtime).
type PodAPI interface {
	// PatchStatus sends patch, a strategic merge patch, to the pod's
	// status subresource.
	PatchStatus(ctx context.Context, namespace, name string, patch []byte) error
	// Delete deletes the pod with opts.
	Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	// Evict creates eviction on its pod's eviction subresource.
	Evict(ctx context.Context, eviction *policyv1.Eviction) error
}

// ClientsetAPI returns a PodAPI that sends the requests with c.
func ClientsetAPI(c kubernetes.Interface) PodAPI { return clientsetAPI{c} }

type clientsetAPI struct{ c kubernetes.Interface }

func (a clientsetAPI) PatchStatus(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := a.c.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func (a clientsetAPI) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return a.c.CoreV1().Pods(namespace).Delete(ctx, name, opts)
}

func (a clientsetAPI) Evict(ctx context.Context, eviction *policyv1.Eviction) error {
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
