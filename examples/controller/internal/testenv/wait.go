package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// The wait functions list and then watch, so they see a state reached before
// they were called as well as one reached after, and they return as soon as
// the watch delivers it. They wait until ctx ends, and then return an error
// that wraps ctx's (context.DeadlineExceeded, say); give ctx the deadline the
// test allows.

// waitErr reports a wait that ctx ended with ctx's error, which watchtools
// does not wrap once the watch has begun.
func waitErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ErrPodDeleted) {
		return context.Cause(ctx)
	}
	return err
}

// ErrPodDeleted is returned by [WaitForPod] when the pod is deleted before it
// satisfies the condition.
var ErrPodDeleted = errors.New("testenv: pod deleted")

// WaitForPod waits until the pod namespace/name exists and cond reports true
// for it, and returns that pod. If the pod is deleted first, cond is asked
// about its last state and, if that is false, WaitForPod returns
// [ErrPodDeleted]; so a test can wait for a deletionTimestamp even if the
// finaliser is quick.
func WaitForPod(ctx context.Context, c kubernetes.Interface, namespace, name string, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var found *corev1.Pod
	_, err := watchtools.UntilWithSync(ctx, podListWatch(c, namespace, name), &corev1.Pod{},
		func(store cache.Store) (bool, error) {
			obj, exists, err := store.GetByKey(namespace + "/" + name)
			if err != nil || !exists {
				return false, err
			}
			if pod := obj.(*corev1.Pod); cond(pod) {
				found = pod
				return true, nil
			}
			return false, nil
		},
		func(ev watch.Event) (bool, error) {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return false, nil
			}
			if cond(pod) {
				found = pod
				return true, nil
			}
			if ev.Type == watch.Deleted {
				return false, ErrPodDeleted
			}
			return false, nil
		})
	if err != nil {
		return nil, fmt.Errorf("testenv: waiting for pod %s/%s: %w", namespace, name, waitErr(ctx, err))
	}
	return found, nil
}

// WaitForPodDeleted waits until the pod namespace/name with uid is gone from
// the API server and returns when that was observed (now, if it was gone
// already). A pod of the same name with another UID does not count.
func WaitForPodDeleted(ctx context.Context, c kubernetes.Interface, namespace, name string, uid types.UID) (time.Time, error) {
	var observed time.Time
	// A pod of the same name with another UID means ours is gone, even if
	// a relist hid its Deleted event.
	gone := func(pod *corev1.Pod, deleted bool) bool {
		if deleted || pod.UID != uid {
			observed = time.Now()
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(ctx, podListWatch(c, namespace, name), &corev1.Pod{},
		func(store cache.Store) (bool, error) {
			obj, exists, err := store.GetByKey(namespace + "/" + name)
			if err != nil {
				return false, err
			}
			if !exists {
				observed = time.Now()
				return true, nil
			}
			return gone(obj.(*corev1.Pod), false), nil
		},
		func(ev watch.Event) (bool, error) {
			pod, ok := ev.Object.(*corev1.Pod)
			return ok && gone(pod, ev.Type == watch.Deleted), nil
		})
	if err != nil {
		return time.Time{}, fmt.Errorf("testenv: waiting for pod %s/%s (uid %s) to be deleted: %w", namespace, name, uid, waitErr(ctx, err))
	}
	return observed, nil
}

// WaitForEvent waits for an Event in namespace with the given reason about the
// object with involvedUID (any object if involvedUID is empty), and returns
// it (one of them, if several exist already). Events recorded through events.k8s.io/v1 count as well:
// the server serves every Event through core/v1 too.
func WaitForEvent(ctx context.Context, c kubernetes.Interface, namespace, reason string, involvedUID types.UID) (*corev1.Event, error) {
	set := fields.Set{"reason": reason}
	if involvedUID != "" {
		set["involvedObject.uid"] = string(involvedUID)
	}
	found, err := waitForEvent(ctx, c, namespace, set, func(*corev1.Event) bool { return true })
	if err != nil {
		return nil, fmt.Errorf("testenv: waiting for event %q in %s (involved uid %q): %w", reason, namespace, involvedUID, err)
	}
	return found, nil
}

// WaitForEventMessage waits for an Event in namespace about the object with
// involvedUID whose message starts with prefix, and returns it.
func WaitForEventMessage(ctx context.Context, c kubernetes.Interface, namespace string, involvedUID types.UID, prefix string) (*corev1.Event, error) {
	found, err := waitForEvent(ctx, c, namespace, fields.Set{"involvedObject.uid": string(involvedUID)},
		func(e *corev1.Event) bool { return strings.HasPrefix(e.Message, prefix) })
	if err != nil {
		return nil, fmt.Errorf("testenv: waiting for an event %q about %s in %s: %w", prefix, involvedUID, namespace, err)
	}
	return found, nil
}

// waitForEvent waits for an Event in namespace that the field set selects
// and match accepts, and returns it.
func waitForEvent(ctx context.Context, c kubernetes.Interface, namespace string, set fields.Set, match func(*corev1.Event) bool) (*corev1.Event, error) {
	sel := set.AsSelector().String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.CoreV1().Events(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.CoreV1().Events(namespace).Watch(ctx, o)
		},
	}
	var found *corev1.Event
	accept := func(obj any) bool {
		if e, ok := obj.(*corev1.Event); ok && match(e) {
			found = e
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Event{},
		func(store cache.Store) (bool, error) { return slices.ContainsFunc(store.List(), accept), nil },
		func(ev watch.Event) (bool, error) { return ev.Type != watch.Deleted && accept(ev.Object), nil })
	if err != nil {
		return nil, waitErr(ctx, err)
	}
	return found, nil
}
