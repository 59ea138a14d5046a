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

// informer returns (not started) an informer of the objects list and watch
// return, handing each state to record.
func informer[T any, PT interface {
	*T
	runtime.Object
}, L runtime.Object](
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	record func(any, bool),
) cache.Controller {
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return list(ctx, o)
			},
			WatchFuncWithContext: watchFn,
		},
		ObjectType: PT(new(T)),
		Handler:    handlers(record),
	})
	return inf
}

// watchDevices returns (not started) informers for every ResourceSlice and
// DeviceTaintRule and for the ResourceClaims of namespace, recording into
// h.devices.
func (h *history) watchDevices(c kubernetes.Interface, namespace string) []cache.Controller {
	r := c.ResourceV1()
	return []cache.Controller{
		informer[resourcev1.ResourceSlice](r.ResourceSlices().List, r.ResourceSlices().Watch,
			recorder(h, h.devices.slices, func(s *resourcev1.ResourceSlice) string { return s.Name })),
		informer[resourcev1.ResourceClaim](r.ResourceClaims(namespace).List, r.ResourceClaims(namespace).Watch,
			recorder(h, h.devices.claims, func(c *resourcev1.ResourceClaim) string { return c.Name })),
		informer[resourcev1.DeviceTaintRule](r.DeviceTaintRules().List, r.DeviceTaintRules().Watch,
			recorder(h, h.devices.rules, func(r *resourcev1.DeviceTaintRule) string { return r.Name })),
	}
}
