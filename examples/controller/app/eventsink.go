package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
)

const (
	// eventQueueSize is the capacity of each of the event sink's two
	// queues: a 10,000-pod outage, one countdown event and one "Marking for
	// deletion" a pod, fits with room to spare. A queued event (queuedEvent,
	// its ObjectReference, its message) takes about 300 bytes: a full queue
	// about 5 MiB, both 10 MiB; an empty one its buffer, 128 KiB.
	eventQueueSize = 16384
	// eventWriters write each queue, so that --events-qps bounds the writes,
	// not one request's latency (at 10 ms each, one writes 100 a second).
	eventWriters = 8
	// eventWriteAttempts bounds the tries of an event whose writes fail
	// with a transient error, eventRetryBackoff apart, doubled after each:
	// 1+2+4+8 = 15 s of waits (client-go's broadcaster tries 12 times, 10 s
	// apart, holding its only writer).
	eventWriteAttempts = 5
	eventRetryBackoff  = time.Second
	// eventDropLogInterval: a drop is logged at V(0) at most this often,
	// every other at V(2).
	eventDropLogInterval = time.Minute

	// MetricEventsDropped counts the events never written, by queue and
	// reason: the label values below.
	MetricEventsDropped = "taintkit_events_dropped_total"
	queueCountdowns     = "countdowns"
	queueEvictions      = "evictions"
	dropQueueFull       = "queue_full"
	dropWriteFailed     = "write_failed"
	dropShutdown        = "shutdown"
)

// countdownPrefixes start the manager's events about a countdown started or
// moved ("Scheduled for deletion at T: …") or stopped ("Cancelling …").
var countdownPrefixes = []string{"Scheduled for deletion", "Cancelling deletion"}

// eventSeq makes event names unique within the process, where the clock
// alone does not (a synctest bubble stops it).
var eventSeq atomic.Uint64

// newEventsDropped registers MetricEventsDropped on reg, each series at 0.
func newEventsDropped(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricEventsDropped,
		Help: "Events never written to the API server, by queue and reason."}, []string{"queue", "reason"})
	for _, q := range []string{queueCountdowns, queueEvictions} {
		for _, r := range []string{dropQueueFull, dropWriteFailed, dropShutdown} {
			c.WithLabelValues(q, r)
		}
	}
	return c, reg.Register(c)
}

// eventSink records the controller's events as client-go's recorder makes
// them (but with no aggregation or spam filter) on two bounded queues, each
// written by eventWriters goroutines with one client, so one rate limiter
// (--events-qps). One queue has the countdowns' events, which come all at
// once when a node is tainted or untainted, the other the rest ("Marking
// for deletion", refusals, dry runs, the rules', the leader election's), so
// that a flood of countdowns neither delays nor drops an eviction's event.
// An event is written or counted in MetricEventsDropped: its queue full
// (the caller never waits), its write failed for good, or at shutdown.
type eventSink struct {
	ctx                   context.Context
	cancel                context.CancelFunc
	client                kubernetes.Interface
	log                   logr.Logger
	dropped               *prometheus.CounterVec
	countdowns, evictions *eventQueue
	wg                    sync.WaitGroup
	// mu is held for writing only to cancel ctx, so that no event is
	// queued after shutdown has drained the queues.
	mu       sync.RWMutex
	lastLoud atomic.Int64 // when a drop was last logged at V(0), UnixNano
}

var _ record.EventRecorder = (*eventSink)(nil) // and so the Lease lock's

type eventQueue struct {
	name string
	ch   chan *queuedEvent
}

// queuedEvent is an event waiting for its write: what the v1.Event is made
// of, without the object it is about.
type queuedEvent struct {
	ref                        *v1.ObjectReference
	annotations                map[string]string
	eventtype, reason, message string
	at                         time.Time
	seq                        uint64
}

// startEventSink starts the writers of a sink writing with client until
// ctx is done or shutdown is called; it logs with ctx's logger and counts
// drops in dropped. Call shutdown in the end.
func startEventSink(ctx context.Context, client kubernetes.Interface, dropped *prometheus.CounterVec) *eventSink {
	s := &eventSink{
		client:     client,
		log:        klog.FromContext(ctx),
		dropped:    dropped,
		countdowns: &eventQueue{name: queueCountdowns, ch: make(chan *queuedEvent, eventQueueSize)},
		evictions:  &eventQueue{name: queueEvictions, ch: make(chan *queuedEvent, eventQueueSize)},
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	for _, q := range []*eventQueue{s.countdowns, s.evictions} {
		for range eventWriters {
			s.wg.Go(func() { s.writer(q) })
		}
	}
	return s
}

// shutdown stops the writers, cancelling the writes in flight, and counts
// the events still queued or recorded from now on as dropped (shutdown):
// the controller is stopping, and a write may wait for the rate limiter or
// a server that does not answer.
func (s *eventSink) shutdown() {
	s.mu.Lock()
	s.cancel()
	s.mu.Unlock()
	s.wg.Wait()
	for _, q := range []*eventQueue{s.countdowns, s.evictions} {
		n := len(q.ch)
		for range n {
			<-q.ch
		}
		if n > 0 {
			s.dropped.WithLabelValues(q.name, dropShutdown).Add(float64(n))
			s.log.Info("Events still queued at shutdown dropped", "queue", q.name, "count", n)
		}
	}
}

func (s *eventSink) Event(obj runtime.Object, eventtype, reason, message string) {
	s.record(obj, nil, eventtype, reason, message)
}

func (s *eventSink) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	s.record(obj, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (s *eventSink) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	s.record(obj, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// record queues an event, or drops it if its queue is full or the sink
// stopped; it never waits.
func (s *eventSink) record(obj runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	ref, err := reference.GetReference(scheme.Scheme, obj)
	if err != nil {
		s.log.Error(err, "Could not construct reference, will not report event", "object", obj, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	if eventtype != v1.EventTypeNormal && eventtype != v1.EventTypeWarning {
		s.log.Error(nil, "Unsupported event type", "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	s.log.V(3).Info("Event occurred", "object", klog.KRef(ref.Namespace, ref.Name), "fieldPath", ref.FieldPath,
		"kind", ref.Kind, "apiVersion", ref.APIVersion, "type", eventtype, "reason", reason, "message", message)
	e := &queuedEvent{ref: ref, annotations: annotations, eventtype: eventtype, reason: reason, message: message,
		at: time.Now(), seq: eventSeq.Add(1)}
	q := s.evictions
	if slices.ContainsFunc(countdownPrefixes, func(p string) bool { return strings.HasPrefix(message, p) }) {
		q = s.countdowns
	}
	s.mu.RLock()
	why := dropShutdown
	if s.ctx.Err() == nil {
		select {
		case q.ch <- e:
			why = ""
		default:
			why = dropQueueFull
		}
	}
	s.mu.RUnlock()
	if why != "" {
		s.drop(q, e, why, nil)
	}
}

func (s *eventSink) writer(q *eventQueue) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case e := <-q.ch:
			s.write(q, e)
		}
	}
}

// write creates e's event, trying again after a transient error. A retry
// told that the event exists takes it as written: the failed attempt's
// request may have been applied, its answer lost.
func (s *eventSink) write(q *eventQueue, e *queuedEvent) {
	ev := e.event()
	backoff := eventRetryBackoff
	for attempt := 1; ; attempt++ {
		_, err := s.client.CoreV1().Events(ev.Namespace).Create(s.ctx, ev, metav1.CreateOptions{})
		switch {
		case err == nil, attempt > 1 && apierrors.IsAlreadyExists(err):
			return
		case s.ctx.Err() != nil:
			s.drop(q, e, dropShutdown, err)
			return
		case !transient(err) || attempt == eventWriteAttempts:
			s.drop(q, e, dropWriteFailed, err)
			return
		}
		s.log.V(4).Info("Event write failed, will retry", "object", klog.KRef(e.ref.Namespace, e.ref.Name), "attempt", attempt, "err", err)
		select {
		case <-s.ctx.Done():
			s.drop(q, e, dropShutdown, err)
			return
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// transient reports whether a write that failed with err may pass if sent
// again: the server throttled it (429) or failed (5xx, timeouts included),
// or no answer came (a timeout, a refused connection, the fence's refusal
// while a renewal is late). Other answers (a 4xx, such as the namespace
// being terminated) would be the same.
func transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	var construction *rest.RequestConstructionError
	return !errors.As(err, &construction)
}

// drop counts e as dropped for why and logs it: at V(2), or at V(0) if no
// drop was logged there for eventDropLogInterval.
func (s *eventSink) drop(q *eventQueue, e *queuedEvent, why string, err error) {
	s.dropped.WithLabelValues(q.name, why).Inc()
	kv := []any{"queue", q.name, "cause", why, "object", klog.KRef(e.ref.Namespace, e.ref.Name),
		"kind", e.ref.Kind, "reason", e.reason, "message", e.message}
	now := time.Now().UnixNano()
	if last := s.lastLoud.Load(); now-last >= int64(eventDropLogInterval) && s.lastLoud.CompareAndSwap(last, now) {
		s.log.Error(err, "Event dropped; more drops this minute are logged at -v=2 only, all counted in "+MetricEventsDropped, kv...)
		return
	}
	s.log.V(2).Info("Event dropped", append(kv, "err", err)...)
}

// event is e's v1.Event, as client-go's recorder makes it, but for its
// name: the object's, the time in nanoseconds and a number of this process,
// in hex.
func (e *queuedEvent) event() *v1.Event {
	t := metav1.NewTime(e.at)
	return &v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s.%x.%x", e.ref.Name, e.at.UnixNano(), e.seq),
			Namespace:   cmp.Or(e.ref.Namespace, metav1.NamespaceDefault),
			Annotations: e.annotations,
		},
		InvolvedObject:      *e.ref,
		Reason:              e.reason,
		Message:             e.message,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                e.eventtype,
		Source:              v1.EventSource{Component: Component},
		ReportingController: Component,
	}
}
