package app_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
)

// The countdowns' events have a queue of their own: while the API server
// holds their writes up (as a backlog of a thousand would), an eviction's
// "Marking for deletion" is still written. (With one queue, the eviction's
// event waited behind every countdown's, and client-go dropped what did not
// fit in the queue.)
func TestRunEvictionEventsDoNotWaitForCountdowns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		client := newFakeAPI(
			taintedNode("node-1", now),
			boundPod("web", "uid-web", "node-1", now, nil),
			boundPod("batch", "uid-batch", "node-1", now, ptr.To(time.Hour)),
		)
		eventsClient := newFakeAPI()
		held := make(chan struct{})
		slow := holdingEvents{Clientset: eventsClient, held: held, prefix: "Scheduled for deletion"}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.RunWithEventsClient(ctx, client, client, slow, testOptions()) }()
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
		cancel()
		require.NoError(t, <-done)
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

func (e holdingEventInterface) CreateWithEventNamespace(event *v1.Event) (*v1.Event, error) {
	if strings.HasPrefix(event.Message, e.h.prefix) {
		<-e.h.held
	}
	//lint:ignore SA1019 client-go's EventSinkImpl writes through this method
	return e.EventInterface.CreateWithEventNamespace(event)
}
