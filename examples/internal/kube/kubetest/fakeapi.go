// Package kubetest is what the tests of package kube and of both example
// controllers share: a fake clientset that checks pods' UIDs as the API
// server does, a PodDisruptionBudget's refusal, and readers of gathered
// Prometheus metrics.
package kubetest

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var podsResource = v1.SchemeGroupVersion.WithResource("pods")

// NewClientset returns a fake clientset holding objs that also checks what
// the API server checks and the fake's tracker does not:
//   - a pods/status patch whose metadata.uid is not the pod's fails as the
//     server fails it, with 422 Invalid on the field metadata.uid;
//   - a pod delete whose UID precondition is not the pod's fails with 409
//     Conflict and deletes nothing;
//   - an eviction (create on pods/eviction) checks the pod exists (404)
//     and the UID precondition (409), then deletes the pod; the fake's
//     own reactor would answer 201 and leave the pod (see RefuseEvictions
//     for a budget's refusal).
func NewClientset(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ca := a.(clienttesting.CreateAction)
		if ca.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := ca.GetObject().(*policyv1.Eviction)
		obj, err := client.Tracker().Get(podsResource, ca.GetNamespace(), ev.Name)
		if err != nil {
			return true, nil, err
		}
		if ev.DeleteOptions != nil && ev.DeleteOptions.Preconditions != nil && ev.DeleteOptions.Preconditions.UID != nil {
			if uid := obj.(*v1.Pod).UID; uid != *ev.DeleteOptions.Preconditions.UID {
				return true, nil, apierrors.NewConflict(v1.Resource("pods"), ev.Name,
					//lint:ignore ST1005 the API server's own message
					fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *ev.DeleteOptions.Preconditions.UID, uid))
			}
		}
		return true, ev, client.Tracker().Delete(podsResource, ca.GetNamespace(), ev.Name)
	})
	client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if pa.GetSubresource() != "status" {
			return false, nil, nil
		}
		var patch struct {
			Metadata struct {
				UID types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil || patch.Metadata.UID == "" {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(podsResource, pa.GetNamespace(), pa.GetName())
		if err != nil {
			return false, nil, nil // the default reactor answers NotFound
		}
		if uid := obj.(*v1.Pod).UID; uid != patch.Metadata.UID {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pa.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("metadata", "uid"), patch.Metadata.UID, "field is immutable"),
			})
		}
		return false, nil, nil
	})
	client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		da := a.(clienttesting.DeleteAction)
		pre := da.GetDeleteOptions().Preconditions
		if pre == nil || pre.UID == nil {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(podsResource, da.GetNamespace(), da.GetName())
		if err != nil {
			return false, nil, nil
		}
		if uid := obj.(*v1.Pod).UID; uid != *pre.UID {
			return true, nil, apierrors.NewConflict(v1.Resource("pods"), da.GetName(),
				//lint:ignore ST1005 the API server's own message
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, uid))
		}
		return false, nil, nil
	})
	return client
}

// RefuseEvictions makes the fake API server refuse the evictions for which
// refuse returns true as it does for a PodDisruptionBudget that allows no
// disruption: 429 TooManyRequests with a DisruptionBudget cause. Other
// evictions go on to NewClientset's reactor.
func RefuseEvictions(client *fake.Clientset, refuse func(namespace, name string) bool) {
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ca := a.(clienttesting.CreateAction)
		if ca.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := ca.GetObject().(*policyv1.Eviction).Name
		if !refuse(ca.GetNamespace(), name) {
			return false, nil, nil
		}
		return true, nil, BudgetRefusal("web-pdb")
	})
}

// BudgetRefusal is the API server's answer to an eviction that the budget
// pdb forbids, as kube-apiserver v1.37 sends it.
func BudgetRefusal(pdb string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb),
	})
	return err
}

// Pod returns the pod default/name with uid, bound to node-1.
func Pod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
		Spec:       v1.PodSpec{NodeName: "node-1"},
	}
}
