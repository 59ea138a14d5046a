package oracle

import (
	"context"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// obs is a state of an object as the watch delivered it, at when; obj is
// nil once the object is deleted.
type obs[T any] struct {
	at  time.Time
	obj *T
}

// stateAt returns the object's state at t: the last one delivered at or
// before t, nil if none yet or deleted.
func stateAt[T any](list []obs[T], t time.Time) *T {
	var s *T
	for _, o := range list {
		if o.at.After(t) {
			break
		}
		s = o.obj
	}
	return s
}

// deviceHistory is what the watches of the DRA objects saw, by name: every
// ResourceSlice and DeviceTaintRule, and the ResourceClaims of the pods'
// namespace.
type deviceHistory struct {
	slices map[string][]obs[resourcev1.ResourceSlice]
	claims map[string][]obs[resourcev1.ResourceClaim]
	rules  map[string][]obs[resourcev1.DeviceTaintRule]
}

func newDeviceHistory() deviceHistory {
	return deviceHistory{
		slices: map[string][]obs[resourcev1.ResourceSlice]{},
		claims: map[string][]obs[resourcev1.ResourceClaim]{},
		rules:  map[string][]obs[resourcev1.DeviceTaintRule]{},
	}
}

func (d deviceHistory) clone() deviceHistory {
	return deviceHistory{slices: cloneObs(d.slices), claims: cloneObs(d.claims), rules: cloneObs(d.rules)}
}

func cloneObs[T any](m map[string][]obs[T]) map[string][]obs[T] {
	out := make(map[string][]obs[T], len(m))
	for k, v := range m {
		out[k] = append([]obs[T](nil), v...)
	}
	return out
}

// recorder returns an informer's handler that appends each state of a T to
// m (under h's lock), keyed by the object's name.
func recorder[T any](h *history, m map[string][]obs[T], name func(*T) string) func(any, bool) {
	return func(obj any, deleted bool) {
		now := time.Now()
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(*T)
		if !ok {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		key := name(o)
		if deleted {
			o = nil
		}
		m[key] = append(m[key], obs[T]{at: now, obj: o})
	}
}

// watchDevices returns (not started) informers for every ResourceSlice and
// DeviceTaintRule and for the ResourceClaims of namespace, recording into
// h.devices.
func (h *history) watchDevices(c kubernetes.Interface, namespace string) []cache.Controller {
	r := c.ResourceV1()
	_, slices := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return r.ResourceSlices().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return r.ResourceSlices().Watch(ctx, o)
			},
		},
		ObjectType: &resourcev1.ResourceSlice{},
		Handler:    handlers(recorder(h, h.devices.slices, func(s *resourcev1.ResourceSlice) string { return s.Name })),
	})
	_, claims := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return r.ResourceClaims(namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return r.ResourceClaims(namespace).Watch(ctx, o)
			},
		},
		ObjectType: &resourcev1.ResourceClaim{},
		Handler:    handlers(recorder(h, h.devices.claims, func(c *resourcev1.ResourceClaim) string { return c.Name })),
	})
	_, rules := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return r.DeviceTaintRules().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return r.DeviceTaintRules().Watch(ctx, o)
			},
		},
		ObjectType: &resourcev1.DeviceTaintRule{},
		Handler:    handlers(recorder(h, h.devices.rules, func(r *resourcev1.DeviceTaintRule) string { return r.Name })),
	})
	return []cache.Controller{slices, claims, rules}
}
