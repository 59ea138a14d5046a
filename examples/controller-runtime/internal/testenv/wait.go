package testenv

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Listed is the type of the event WaitFor passes once it has passed every
// listed object (its Object is nil).
const Listed watch.EventType = "LISTED"

// WaitFor lists and then watches the objects of list's kind that opts
// select, as an informer does, until done returns true for an event; it
// returns nil then, or an error when ctx ends first. The listed objects
// come as ADDED events, followed by a Listed event; when the server ends
// the watch, WaitFor lists again. It reads the API server's watch cache
// (resourceVersion "0", then the list's), as informers do: a watch from
// "now" must wait for the cache to reach etcd's latest revision, which
// etcd 3.4 reports late.
func WaitFor(ctx context.Context, c client.WithWatch, list client.ObjectList, done func(watch.Event) bool, opts ...client.ListOption) error {
	for {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, l, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})...); err != nil {
			return fmt.Errorf("testenv: list %T: %w", list, err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return fmt.Errorf("testenv: list %T: %w", list, err)
		}
		for _, item := range items {
			if done(watch.Event{Type: watch.Added, Object: item}) {
				return nil
			}
		}
		if done(watch.Event{Type: Listed}) {
			return nil
		}
		w, err := c.Watch(ctx, list, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})...)
		if err != nil {
			return fmt.Errorf("testenv: watch %T: %w", list, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Error && done(ev) {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("testenv: watch %T: %w", list, ctx.Err())
		}
	}
}

// Named selects the object namespace/name, for WaitFor.
func Named(namespace, name string) []client.ListOption {
	return []client.ListOption{client.InNamespace(namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)}}
}

// WaitDeleted waits until the object with obj's UID (any UID if obj has
// none) is being deleted (it has a deletionTimestamp: a bound pod keeps one
// until its kubelet, which envtest lacks, confirms) or gone; list is a list
// of obj's kind.
func WaitDeleted(ctx context.Context, c client.WithWatch, list client.ObjectList, obj client.Object) error {
	present := false
	return WaitFor(ctx, c, list, func(ev watch.Event) bool {
		switch ev.Type {
		case Listed:
			gone := !present
			present = false // for the next list, if the watch ends
			return gone
		case watch.Deleted:
			return true
		}
		o, ok := ev.Object.(client.Object)
		if !ok || (obj.GetUID() != "" && o.GetUID() != obj.GetUID()) || o.GetDeletionTimestamp() != nil {
			return true
		}
		present = true
		return false
	}, Named(obj.GetNamespace(), obj.GetName())...)
}
