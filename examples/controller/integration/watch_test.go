package integration_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/taintkit/taintkit/tolerations"
)

// podWatch follows one pod (one UID) from its creation to its deletion,
// so that nothing the controller does to it is missed however fast it
// goes: the DisruptionTarget condition, the deletionTimestamp, the end.
type podWatch struct {
	pod  *corev1.Pod   // as created
	gone chan struct{} // closed when the pod is deleted or the watch fails

	mu         sync.Mutex
	goneAt     time.Time   // when its Deleted event arrived
	last       *corev1.Pod // the last state seen
	disruption *corev1.PodCondition
	err        error
}

// watchPod starts following pod from the resourceVersion it was created or
// last updated with, until it is deleted or the test's ctx ends.
func (h *harness) watchPod(pod *corev1.Pod) *podWatch {
	h.t.Helper()
	w := &podWatch{pod: pod, last: pod, gone: make(chan struct{})}
	sel := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	pods := h.c.CoreV1().Pods(pod.Namespace)
	rw, err := watchtools.NewRetryWatcherWithContext(h.ctx, pod.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	})
	require.NoError(h.t, err)
	go func() {
		defer rw.Stop()
		defer close(w.gone)
		for {
			select {
			case <-h.ctx.Done():
				w.fail(h.ctx.Err())
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					w.fail(context.Canceled)
					return
				}
				if ev.Type == watch.Error {
					continue // the retry watcher starts again
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || p.UID != pod.UID {
					continue
				}
				if w.observe(p, ev.Type == watch.Deleted) {
					return
				}
			}
		}
	}()
	return w
}

func (w *podWatch) observe(p *corev1.Pod, deleted bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = p
	if c := condition(p, corev1.DisruptionTarget); c != nil && w.disruption == nil {
		w.disruption = c.DeepCopy()
	}
	if deleted {
		w.goneAt = time.Now()
	}
	return deleted
}

func (w *podWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

// waitDeleted waits up to d for the pod to be deleted and returns when the
// deletion was seen.
func (w *podWatch) waitDeleted(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-w.gone:
	case <-time.After(d):
		t.Fatalf("pod %s/%s (uid %s) not deleted within %v", w.pod.Namespace, w.pod.Name, w.pod.UID, d)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NoError(t, w.err, "watching pod %s/%s", w.pod.Namespace, w.pod.Name)
	return w.goneAt
}

// stays asserts that the pod is not deleted until the wall clock reaches
// until: the one wait in these tests for something not to happen.
func (w *podWatch) stays(t *testing.T, until time.Time) {
	t.Helper()
	select {
	case <-w.gone:
		w.mu.Lock()
		defer w.mu.Unlock()
		require.NoError(t, w.err, "watching pod %s/%s", w.pod.Namespace, w.pod.Name)
		t.Fatalf("pod %s/%s (uid %s) deleted at %s, expected it to stay at least until %s",
			w.pod.Namespace, w.pod.Name, w.pod.UID, w.goneAt.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
	case <-time.After(time.Until(until)):
	}
}

// disruptionTarget returns the DisruptionTarget condition the pod carried
// at any point (nil if none).
func (w *podWatch) disruptionTarget() *corev1.PodCondition {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.disruption
}

// waitForEvent waits for the manager's TaintManagerEviction event about
// pod (by UID: an event about a predecessor under the same name does not
// count) whose message starts with prefix ("Marking for deletion",
// "Cancelling deletion"), and returns it.
func (h *harness) waitForEvent(ctx context.Context, pod *corev1.Pod, prefix string) (*corev1.Event, error) {
	return h.waitForEventReason(ctx, pod, tolerations.EventReasonTaintManagerEviction, prefix)
}

// waitForEventReason is waitForEvent for the events with reason.
func (h *harness) waitForEventReason(ctx context.Context, pod *corev1.Pod, reason, prefix string) (*corev1.Event, error) {
	lw := h.eventListWatch(pod.Name, reason)
	var found *corev1.Event
	match := func(obj any) bool {
		e, ok := obj.(*corev1.Event)
		if ok && strings.HasPrefix(e.Message, prefix) && e.InvolvedObject.UID == pod.UID {
			found = e
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Event{},
		func(store cache.Store) (bool, error) {
			for _, obj := range store.List() {
				if match(obj) {
					return true, nil
				}
			}
			return false, nil
		},
		func(ev watch.Event) (bool, error) { return ev.Type != watch.Deleted && match(ev.Object), nil })
	return found, err
}

// events lists the manager's events about the pod named name whose
// message starts with prefix.
func (h *harness) events(name, prefix string) []corev1.Event {
	h.t.Helper()
	list, err := h.c.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: eventSelector(name, tolerations.EventReasonTaintManagerEviction)})
	require.NoError(h.t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if strings.HasPrefix(e.Message, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func eventSelector(name, reason string) string {
	return fields.Set{
		"involvedObject.name": name,
		"reason":              reason,
	}.AsSelector().String()
}

func (h *harness) eventListWatch(name, reason string) cache.ListerWatcher {
	return eventListWatch(h.c.CoreV1().Events(h.ns), eventSelector(name, reason))
}

// eventListWatch lists and watches the events that sel selects.
func eventListWatch(events typedcorev1.EventInterface, sel string) cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return events.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return events.Watch(ctx, o)
		},
	}
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// countdownStart is when a pod's countdown on node's taint starts, from the
// values the server stored: the later of the taint's TimeAdded and the
// pod's PodScheduled time.
func countdownStart(t *testing.T, node *corev1.Node, taintKey string, pod *corev1.Pod) time.Time {
	t.Helper()
	var start time.Time
	for _, taint := range node.Spec.Taints {
		if taint.Key == taintKey {
			require.NotNil(t, taint.TimeAdded, "taint %s has no TimeAdded", taintKey)
			start = taint.TimeAdded.Time
		}
	}
	require.False(t, start.IsZero(), "node %s has no taint %s", node.Name, taintKey)
	scheduled := condition(pod, corev1.PodScheduled)
	require.NotNil(t, scheduled, "pod %s has no PodScheduled", pod.Name)
	if scheduled.LastTransitionTime.After(start) {
		start = scheduled.LastTransitionTime.Time
	}
	return start
}

func seconds(d time.Duration) *int64 {
	s := int64(d / time.Second)
	return &s
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
