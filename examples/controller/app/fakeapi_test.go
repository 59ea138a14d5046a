package app_test

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

var podsResource = v1.SchemeGroupVersion.WithResource("pods")

// newFakeAPI returns kubetest.NewClientset(objs...), which checks pods'
// UIDs as the API server does. Events need nothing more: their names are
// unique even when a synctest bubble stops the clock (eventSink), and the
// tracker refuses a name that exists, as the server does.
func newFakeAPI(objs ...runtime.Object) *fake.Clientset {
	return kubetest.NewClientset(objs...)
}

// testPod returns the pod default/name with uid, bound to node-1.
func testPod(name string, uid types.UID) *v1.Pod { return kubetest.Pod(name, uid) }

// actionName returns the name of the object a recorded action is about
// (for a create or an update, the object's), or "" for a list or a watch.
func actionName(a clienttesting.Action) string {
	switch a := a.(type) {
	case interface{ GetName() string }: // get, delete, patch
		return a.GetName()
	case interface{ GetObject() runtime.Object }: // create, update
		if o, err := meta.Accessor(a.GetObject()); err == nil {
			return o.GetName()
		}
	}
	return ""
}
