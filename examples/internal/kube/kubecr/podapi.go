// Package kubecr is package kube's [kube.PodClient] on a controller-runtime
// client, for examples/controller-runtime. It is a package of its own so
// that examples/controller, which uses kube on a clientset, does not link
// controller-runtime.
package kubecr

import (
	"context"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taintkit/taintkit/examples/internal/kube"
)

// PodAPI returns a [kube.PodAPI] that sends the requests with c, a
// controller-runtime manager's client (so that its interceptors see them).
func PodAPI(c client.Client) kube.PodAPI { return controllerRuntimeAPI{c} }

type controllerRuntimeAPI struct{ c client.Client }

func pod(namespace, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func (a controllerRuntimeAPI) PatchStatus(ctx context.Context, namespace, name string, patch []byte) error {
	return a.c.Status().Patch(ctx, pod(namespace, name), client.RawPatch(types.StrategicMergePatchType, patch))
}

func (a controllerRuntimeAPI) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	// Not as client.DeleteOptions.Raw: the client overwrites Raw's
	// preconditions, grace period and policy with its own fields.
	return a.c.Delete(ctx, pod(namespace, name), &client.DeleteOptions{GracePeriodSeconds: opts.GracePeriodSeconds,
		Preconditions: opts.Preconditions, PropagationPolicy: opts.PropagationPolicy, DryRun: opts.DryRun})
}

func (a controllerRuntimeAPI) Evict(ctx context.Context, eviction *policyv1.Eviction) error {
	return a.c.SubResource("eviction").Create(ctx, pod(eviction.Namespace, eviction.Name), eviction)
}
