package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

// The countdowns' events have a queue of their own: while the API server
// holds their writes up (as a backlog of a thousand would), an eviction's
// "Marking for deletion" is still written. (With one queue, the eviction's
// event waited behind every countdown's, and client-go dropped what did not
// fit in the queue.) There are more countdowns than the sink has writers
// for a queue, so that one queue would have all of its writers held.
func TestRunEvictionEventsDoNotWaitForCountdowns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		objs := []runtime.Object{
			taintedNode("node-1", now),
			boundPod("web", "uid-web", "node-1", now, nil),
			boundPod("batch", "uid-batch", "node-1", now, ptr.To(time.Hour)),
		}
		const more = 20
		for i := range more {
			objs = append(objs, boundPod(fmt.Sprint("batch-", i), types.UID(fmt.Sprint("uid-batch-", i)), "node-1", now, ptr.To(time.Hour)))
		}
		client := newFakeAPI(objs...)
		eventsClient := newFakeAPI()
		held := make(chan struct{})
		slow := holdingEvents{Clientset: eventsClient, held: held, prefix: "Scheduled for deletion"}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		o := testOptions()
		go func() { done <- app.RunWithEventsClient(ctx, client, client, slow, o) }()
		synctest.Wait()

		assert.False(t, podExists(t, client, "web"), "untolerated pod deleted")
		assert.Equal(t, []string{"Marking for deletion Pod default/web"}, events(t, eventsClient, "web"),
			"the eviction's event waited for the countdowns'")
		assert.Empty(t, events(t, eventsClient, "batch"))

		close(held)
		synctest.Wait()
		assert.ElementsMatch(t, []string{
			"Scheduled for deletion at " + now.UTC().Format(time.RFC3339Nano) + ": taint " + unreachable + ":NoExecute not tolerated",
			"Marking for deletion Pod default/web",
		}, events(t, eventsClient, "web"))
		assert.Len(t, events(t, eventsClient, "batch"), 1)
		for i := range more {
			assert.Len(t, events(t, eventsClient, fmt.Sprint("batch-", i)), 1)
		}
		cancel()
		require.NoError(t, <-done)
		for _, q := range []string{"countdowns", "evictions"} {
			for _, reason := range []string{"queue_full", "write_failed", "shutdown"} {
				kubetest.RequireValue(t, o.Registry, 0, app.MetricEventsDropped, "queue", q, "reason", reason)
			}
		}
	})
}

// holdingEvents is a clientset whose event creates with a message starting
// with prefix wait until held is closed, as writes to a busy API server
// wait. (A reactor of the fake cannot wait: the fake calls reactors under
// its lock.)
type holdingEvents struct {
	*fake.Clientset
	held   <-chan struct{}
	prefix string
}

func (h holdingEvents) CoreV1() typedcorev1.CoreV1Interface {
	return holdingCoreV1{h.Clientset.CoreV1(), h}
}

type holdingCoreV1 struct {
	typedcorev1.CoreV1Interface
	h holdingEvents
}

func (c holdingCoreV1) Events(namespace string) typedcorev1.EventInterface {
	return holdingEventInterface{c.CoreV1Interface.Events(namespace), c.h}
}

type holdingEventInterface struct {
	typedcorev1.EventInterface
	h holdingEvents
}

func (e holdingEventInterface) Create(ctx context.Context, event *v1.Event, opts metav1.CreateOptions) (*v1.Event, error) {
	if strings.HasPrefix(event.Message, e.h.prefix) {
		select {
		case <-e.h.held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return e.EventInterface.Create(ctx, event, opts)
}
