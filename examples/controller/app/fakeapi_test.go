package app_test

import (
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

var (
	podsResource   = v1.SchemeGroupVersion.WithResource("pods")
	eventsResource = v1.SchemeGroupVersion.WithResource("events")
)

// newFakeAPI returns kubetest.NewClientset(objs...), which checks pods'
// UIDs as the API server does, and also gives an event created under a
// name that exists a suffix: the recorder names events after the clock,
// which a synctest bubble stops, and the server would take both.
func newFakeAPI(objs ...runtime.Object) *fake.Clientset {
	client := kubetest.NewClientset(objs...)
	var eventNames atomic.Int64
	client.PrependReactor("create", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ca := a.(clienttesting.CreateAction)
		e := ca.GetObject().(*v1.Event)
		if _, err := client.Tracker().Get(eventsResource, ca.GetNamespace(), e.Name); err != nil {
			return false, nil, nil
		}
		e = e.DeepCopy()
		e.Name = fmt.Sprintf("%s-%d", e.Name, eventNames.Add(1))
		return true, e, client.Tracker().Create(eventsResource, e, ca.GetNamespace())
	})
	return client
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
