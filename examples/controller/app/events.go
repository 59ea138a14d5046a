package app

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// countdownPrefixes start the manager's events about countdowns: one
// started or moved ("Scheduled for deletion at T: …"), one stopped
// ("Cancelling deletion of Pod …").
var countdownPrefixes = []string{"Scheduled for deletion", "Cancelling deletion"}

// events records the controller's events through two of client-go's
// broadcasters, each with its queue (client-go holds at most 1,000 events
// per queue and drops the rest) and its sink goroutine, both writing with
// one clientset, so one rate limiter: --events-qps bounds them together.
// One queue carries the countdowns' events, which come all at once when a
// node is tainted or untainted (a thousand pods, a thousand events); the
// other carries everything else: the evictions' own ("Marking for
// deletion", refusals, fallbacks, dry runs) and the leader election's. So
// an eviction's event never waits behind, or is dropped for, a flood of
// countdowns.
type events struct {
	evictions, countdowns record.EventBroadcaster
	recorder              record.EventRecorder
}

// startEvents starts the broadcasters, writing with client until ctx is
// done or shutdown is called.
func startEvents(ctx context.Context, client kubernetes.Interface) *events {
	sink := &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	source := v1.EventSource{Component: Component}
	e := &events{
		evictions:  record.NewBroadcaster(record.WithContext(ctx)),
		countdowns: record.NewBroadcaster(record.WithContext(ctx)),
	}
	for _, b := range []record.EventBroadcaster{e.evictions, e.countdowns} {
		b.StartStructuredLogging(3)
		b.StartRecordingToSink(sink)
	}
	e.recorder = splitRecorder{
		countdowns: e.countdowns.NewRecorder(scheme.Scheme, source),
		other:      e.evictions.NewRecorder(scheme.Scheme, source),
	}
	return e
}

// shutdown stops both broadcasters; events still queued are lost.
func (e *events) shutdown() {
	e.evictions.Shutdown()
	e.countdowns.Shutdown()
}

// splitRecorder sends the countdowns' events to one recorder and the rest
// to the other.
type splitRecorder struct {
	countdowns, other record.EventRecorder
}

func (r splitRecorder) pick(messageFmt string) record.EventRecorder {
	for _, p := range countdownPrefixes {
		if strings.HasPrefix(messageFmt, p) {
			return r.countdowns
		}
	}
	return r.other
}

func (r splitRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.pick(message).Event(object, eventtype, reason, message)
}

func (r splitRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.pick(messageFmt).Eventf(object, eventtype, reason, messageFmt, args...)
}

func (r splitRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.pick(messageFmt).AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}
