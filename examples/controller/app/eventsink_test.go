package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

// The event sink's tests run in synctest bubbles: synctest.Wait returns
// once every writer is idle or held, and time.Sleep moves the bubble's
// clock past retry backoffs.

func sinkPod(i int) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprint("uid-", i))}}
}

// newEventsFake returns a fake clientset for the sink's tens of thousands
// of creates: fake.NewClientset's tracker, which manages fields, builds a
// REST mapper for each create (milliseconds each), the simple one does not.
func newEventsFake() *fake.Clientset {
	return fake.NewSimpleClientset()
}

// startTestSink starts a sink on client with its metric on a registry of
// its own, shut down at the end of the test.
func startTestSink(t *testing.T, ctx context.Context, client kubernetes.Interface) (*eventSink, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	dropped, err := newEventsDropped(reg)
	require.NoError(t, err)
	s := startEventSink(ctx, client, dropped)
	t.Cleanup(s.shutdown)
	return s, reg
}

func listEvents(t *testing.T, client kubernetes.Interface, namespace string) []v1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return list.Items
}

// requireDropped asserts the drop counts of queue: queue_full,
// write_failed, shutdown.
func requireDropped(t *testing.T, reg prometheus.Gatherer, queue string, full, failed, shutdown float64) {
	t.Helper()
	kubetest.RequireValue(t, reg, full, MetricEventsDropped, "queue", queue, "reason", dropQueueFull)
	kubetest.RequireValue(t, reg, failed, MetricEventsDropped, "queue", queue, "reason", dropWriteFailed)
	kubetest.RequireValue(t, reg, shutdown, MetricEventsDropped, "queue", queue, "reason", dropShutdown)
}

// A 10,000-pod outage: each pod's countdown event and "Marking for
// deletion", recorded as fast as the caller can, are all written, one of
// each per pod. (client-go's broadcasters held 1,000 and dropped the rest.)
func TestEventSinkWritesAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		s, reg := startTestSink(t, t.Context(), client)
		const pods = 10000
		for i := range pods {
			s.Eventf(sinkPod(i), v1.EventTypeNormal, "TaintManagerEviction", "Scheduled for deletion at %s: taint not tolerated", time.Now().UTC().Format(time.RFC3339))
			s.Eventf(sinkPod(i), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-%d", i)
		}
		synctest.Wait()

		marking, scheduled := map[string]int{}, map[string]int{}
		for _, e := range listEvents(t, client, "default") {
			if e.Message == "Marking for deletion Pod default/"+e.InvolvedObject.Name {
				marking[e.InvolvedObject.Name]++
			} else {
				scheduled[e.InvolvedObject.Name]++
			}
		}
		require.Equal(t, pods, len(marking), "pods with a Marking event")
		require.Equal(t, pods, len(scheduled), "pods with a countdown event")
		for i := range pods {
			name := sinkPod(i).Name
			require.Equal(t, 1, marking[name], name)
			require.Equal(t, 1, scheduled[name], name)
		}
		requireDropped(t, reg, queueEvictions, 0, 0, 0)
		requireDropped(t, reg, queueCountdowns, 0, 0, 0)
	})
}

// An event is client-go's recorder's, but for its name.
func TestEventSinkMakesClientGosEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		b := record.NewBroadcaster(record.WithContext(ctx))
		defer b.Shutdown()
		theirs := make(chan *v1.Event, 2)
		b.StartEventWatcher(func(e *v1.Event) { theirs <- e })
		recorder := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: Component})

		client := newEventsFake()
		s, _ := startTestSink(t, t.Context(), client)
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node"}}
		for _, r := range []record.EventRecorder{recorder, s} {
			r.AnnotatedEventf(sinkPod(1), map[string]string{"a": "b"}, v1.EventTypeWarning, "Failing", "Deleting %s", "it")
			r.Eventf(node, v1.EventTypeNormal, "TooManyPods", "cluster-scoped")
		}
		synctest.Wait()

		ours := listEvents(t, client, "default")
		require.Len(t, ours, 2)
		for _, got := range ours {
			var want *v1.Event
			select {
			case want = <-theirs:
			default:
				require.FailNow(t, "client-go's recorder made fewer events")
			}
			if want.InvolvedObject.Name != got.InvolvedObject.Name {
				theirs <- want // the other one
				want = <-theirs
			}
			assert.Regexp(t, `^`+want.InvolvedObject.Name+`\.[0-9a-f]+\.[0-9a-f]+$`, got.Name)
			want.Name = got.Name
			got.TypeMeta, got.ResourceVersion, got.ManagedFields = metav1.TypeMeta{}, "", nil
			assert.Equal(t, *want, got)
		}
	})
}

// Many events about one pod at one instant (the clock stands still in a
// bubble) have names of their own: none is refused as existing.
func TestEventSinkNamesAreUnique(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		s, reg := startTestSink(t, t.Context(), client)
		const n = 1000
		for range n {
			s.Event(sinkPod(1), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-1")
		}
		synctest.Wait()

		names := map[string]bool{}
		for _, e := range listEvents(t, client, "default") {
			names[e.Name] = true
		}
		assert.Equal(t, n, len(names), "distinct names")
		requireDropped(t, reg, queueEvictions, 0, 0, 0)
	})
}

// A full queue drops the event and counts it, and the caller does not wait.
func TestEventSinkFullQueueDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		gate := make(chan struct{})
		s, reg := startTestSink(t, t.Context(), gatedClient{client, gate})
		record := func(from, to int) {
			for i := from; i < to; i++ {
				s.Eventf(sinkPod(i), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-%d", i)
			}
		}
		record(0, eventWriters) // one for each writer, held
		synctest.Wait()
		record(eventWriters, eventWriters+eventQueueSize+3) // fills the queue, 3 more

		requireDropped(t, reg, queueEvictions, 3, 0, 0)
		requireDropped(t, reg, queueCountdowns, 0, 0, 0)
		s.Event(sinkPod(0), v1.EventTypeNormal, "TaintManagerEviction", "Scheduled for deletion at T")
		close(gate)
		synctest.Wait()
		assert.Len(t, listEvents(t, client, "default"), eventWriters+eventQueueSize+1)
		requireDropped(t, reg, queueEvictions, 3, 0, 0)
		requireDropped(t, reg, queueCountdowns, 0, 0, 0)
	})
}

// A write the server refuses for good is tried once, and counted.
func TestEventSinkPermanentErrorDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		var tries atomic.Int32
		client.PrependReactor("create", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
			tries.Add(1)
			err := apierrors.NewForbidden(v1.Resource("events"), "", errors.New("namespace default is being terminated"))
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}
			return true, nil, err
		})
		s, reg := startTestSink(t, t.Context(), client)
		s.Event(sinkPod(1), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-1")
		synctest.Wait()
		time.Sleep(time.Minute) // no retry
		synctest.Wait()

		assert.Equal(t, int32(1), tries.Load())
		requireDropped(t, reg, queueEvictions, 0, 1, 0)
	})
}

// A write that fails with transient errors is retried after a backoff.
func TestEventSinkRetriesTransientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		var tries atomic.Int32
		client.PrependReactor("create", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
			if tries.Add(1) <= 2 {
				return true, nil, apierrors.NewInternalError(errors.New("etcd is sad"))
			}
			return false, nil, nil
		})
		s, reg := startTestSink(t, t.Context(), client)
		start := time.Now()
		s.Event(sinkPod(1), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-1")
		synctest.Wait()
		assert.Equal(t, int32(1), tries.Load())
		time.Sleep(eventRetryBackoff)
		synctest.Wait()
		assert.Equal(t, int32(2), tries.Load(), "retried after %v", time.Since(start))
		assert.Empty(t, listEvents(t, client, "default"))
		time.Sleep(2 * eventRetryBackoff)
		synctest.Wait()

		assert.Equal(t, int32(3), tries.Load())
		assert.Len(t, listEvents(t, client, "default"), 1)
		requireDropped(t, reg, queueEvictions, 0, 0, 0)
	})
}

// A write that keeps failing is given up after eventWriteAttempts.
func TestEventSinkGivesUpRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		var tries atomic.Int32
		client.PrependReactor("create", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
			tries.Add(1)
			return true, nil, apierrors.NewTooManyRequests("slow down", 1)
		})
		s, reg := startTestSink(t, t.Context(), client)
		s.Event(sinkPod(1), v1.EventTypeNormal, "TaintManagerEviction", "Scheduled for deletion at T")
		time.Sleep(time.Hour)
		synctest.Wait()

		assert.Equal(t, int32(eventWriteAttempts), tries.Load())
		requireDropped(t, reg, queueCountdowns, 0, 1, 0)
	})
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "events"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewTooManyRequests("", 1), true},
		{apierrors.NewInternalError(errors.New("x")), true},
		{apierrors.NewServiceUnavailable("x"), true},
		{apierrors.NewServerTimeout(gr, "create", 1), true},
		{apierrors.NewTimeoutError("x", 1), true},
		{&url.Error{Op: "Post", URL: "https://api", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, true},
		{&url.Error{Op: "Post", URL: "https://api", Err: fmt.Errorf("%w: POST not sent", leasefence.ErrExpired)}, true},
		{apierrors.NewForbidden(gr, "", errors.New("namespace is being terminated")), false},
		{apierrors.NewBadRequest("x"), false},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewAlreadyExists(gr, "x"), false},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x", nil), false},
		{&rest.RequestConstructionError{Err: errors.New("x")}, false},
	} {
		assert.Equal(t, tc.want, transient(tc.err), "%v", tc.err)
	}
}

// At shutdown the writes in flight are cancelled and what is queued is
// dropped, all counted; so is what is recorded after; no writer is left
// (synctest.Test fails on a goroutine left in its bubble).
func TestEventSinkShutdownCountsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		gate := make(chan struct{}) // never opened
		s, reg := startTestSink(t, t.Context(), gatedClient{client, gate})
		for i := range eventWriters + 10 {
			s.Eventf(sinkPod(i), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-%d", i)
		}
		s.Event(sinkPod(0), v1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod default/pod-0")
		synctest.Wait()
		s.shutdown()

		requireDropped(t, reg, queueEvictions, 0, 0, eventWriters+10)
		requireDropped(t, reg, queueCountdowns, 0, 0, 1)
		s.Event(sinkPod(0), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-0")
		requireDropped(t, reg, queueEvictions, 0, 0, eventWriters+11)
		assert.Empty(t, listEvents(t, client, "default"))
	})
}

// When the sink's context ends its writers stop; what is queued then, or
// recorded after, is counted at shutdown.
func TestEventSinkStopsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newEventsFake()
		ctx, cancel := context.WithCancel(t.Context())
		s, reg := startTestSink(t, ctx, client)
		s.Event(sinkPod(1), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-1")
		synctest.Wait()
		cancel()
		synctest.Wait()
		s.Event(sinkPod(2), v1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod default/pod-2")
		s.shutdown()

		assert.Len(t, listEvents(t, client, "default"), 1)
		requireDropped(t, reg, queueEvictions, 0, 0, 1)
	})
}

// gatedClient is a clientset whose event creates wait until gate is
// closed, as writes to a busy API server wait, or for their context. (A
// reactor of the fake cannot wait: the fake calls reactors under its lock.)
type gatedClient struct {
	*fake.Clientset
	gate <-chan struct{}
}

func (c gatedClient) CoreV1() typedcorev1.CoreV1Interface {
	return gatedCoreV1{c.Clientset.CoreV1(), c.gate}
}

type gatedCoreV1 struct {
	typedcorev1.CoreV1Interface
	gate <-chan struct{}
}

func (c gatedCoreV1) Events(namespace string) typedcorev1.EventInterface {
	return gatedEvents{c.CoreV1Interface.Events(namespace), c.gate}
}

type gatedEvents struct {
	typedcorev1.EventInterface
	gate <-chan struct{}
}

func (e gatedEvents) Create(ctx context.Context, event *v1.Event, opts metav1.CreateOptions) (*v1.Event, error) {
	select {
	case <-e.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.EventInterface.Create(ctx, event, opts)
}
