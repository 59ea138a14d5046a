package app_test

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var podsResource = v1.SchemeGroupVersion.WithResource("pods")

// newFakeAPI returns a fake clientset holding objs that also checks what
// the API server checks and the fake's tracker does not:
//   - a pods/status patch whose metadata.uid is not the pod's fails as the
//     server fails it, with 422 Invalid on the field metadata.uid;
//   - a pod delete whose UID precondition is not the pod's fails with 409
//     Conflict and deletes nothing.
func newFakeAPI(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
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
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, uid))
		}
		return false, nil, nil
	})
	return client
}
