package actor_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clientworkqueue "k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/examples/actor"
	"github.com/taintkit/taintkit/examples/internal/actat"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Each case changes one ConfigMap's annotation as a user would, on client-go's
// fake clientset, while a FakeClock moves; the controller must act on it
// once, at the time the annotation finally gives, or never, and the queue
// must hand its key out only to act.
func TestActsOnceOnTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		// run creates and changes the ConfigMap; it returns when the
		// controller must act, or zero for never.
		run func(h *harness) time.Duration
	}{
		{"set", func(h *harness) time.Duration {
			h.create(10 * time.Second)
			return 10 * time.Second
		}},
		{"already past", func(h *harness) time.Duration {
			h.create(-time.Hour)
			return 0
		}},
		{"postponed", func(h *harness) time.Duration {
			h.create(10 * time.Second)
			h.annotate(actAt(20 * time.Second))
			return 20 * time.Second
		}},
		{"brought earlier", func(h *harness) time.Duration {
			h.create(time.Hour)
			h.annotate(actAt(10 * time.Second))
			return 10 * time.Second
		}},
		{"postponed at the last moment", func(h *harness) time.Duration {
			h.create(10 * time.Second)
			h.step(10*time.Second - time.Nanosecond)
			h.annotate(actAt(20 * time.Second))
			return 20 * time.Second
		}},
		{"deleted", func(h *harness) time.Duration {
			h.create(10 * time.Second)
			h.delete()
			return -1
		}},
		{"annotation removed", func(h *harness) time.Duration {
			h.create(10 * time.Second)
			h.annotate("")
			return -1
		}},
		{"invalid time", func(h *harness) time.Duration {
			h.create(10 * time.Second)
			h.annotate("tomorrow")
			return -1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t)
				want := tc.run(h)
				if want < 0 {
					h.step(time.Hour)
					assert.Empty(t, h.acts(), "acted")
					assert.Zero(t, h.handedOut(), "handed out for nothing")
					return
				}
				if since := h.clk.Since(t0); want > since {
					h.step(want - since - time.Nanosecond)
					assert.Empty(t, h.acts(), "acted early")
					h.step(time.Nanosecond)
				}
				h.step(0)
				assert.Equal(t, []time.Duration{max(want, h.createdAt)}, h.acts(), "acted")
				h.step(time.Hour)
				assert.Len(t, h.acts(), 1, "acted again")
				assert.Equal(t, 1, h.handedOut(), "handed out for nothing")
			})
		})
	}
}

// Once acted on, a ConfigMap is acted on again only for a new time.
func TestActsAgainOnlyForANewTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t)
		h.create(10 * time.Second)
		h.step(10 * time.Second)
		cm, err := h.client.CoreV1().ConfigMaps("ns").Get(context.Background(), "cm", metav1.GetOptions{})
		require.NoError(t, err)
		cm.Labels = map[string]string{"changed": "yes"}
		_, err = h.client.CoreV1().ConfigMaps("ns").Update(context.Background(), cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		h.step(time.Minute)
		h.annotate(actAt(2 * time.Minute))
		h.step(2*time.Minute - h.clk.Since(t0))
		h.step(time.Hour)
		assert.Equal(t, []time.Duration{10 * time.Second, 2 * time.Minute}, h.acts())
		assert.Equal(t, 2, h.handedOut(), "handed out for nothing")
	})
}

// harness runs the controller on a fake clientset and a FakeClock at t0,
// and records the times of its actions (PATCHes of the ConfigMap "cm") and
// how many keys its queue handed out.
type harness struct {
	t         *testing.T
	clk       *testingclock.FakeClock
	client    *fake.Clientset
	createdAt time.Duration

	mu      sync.Mutex
	patches []time.Duration
	gets    int
}

func start(t *testing.T) *harness {
	h := &harness{t: t, clk: testingclock.NewFakeClock(t0), client: fake.NewClientset()}
	h.client.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.patches = append(h.patches, h.clk.Since(t0))
		return false, nil, nil // on to the tracker
	})
	factory := informers.NewSharedInformerFactory(h.client, 0)
	started := make(chan struct{})
	var once sync.Once
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, `"Caches synced, starting workers"`) {
			once.Do(func() { close(started) })
		}
	}, funcr.Options{})
	c, err := actor.New(h.client, factory.Core().V1().ConfigMaps(), actor.Config{
		Clock: h.clk, MetricsProvider: handOuts{h}, Logger: logger})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	// Run waits for the informer's sync as controllers do, polling every
	// 100 ms of the bubble's time, which passes at once while every
	// goroutine of the bubble waits: here, for its workers to start.
	<-started
	synctest.Wait()
	return h
}

// actAt returns the annotation's value for t0+d.
func actAt(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }

func (h *harness) create(at time.Duration) {
	h.createdAt = h.clk.Since(t0)
	_, err := h.client.CoreV1().ConfigMaps("ns").Create(context.Background(), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "cm", Annotations: map[string]string{actat.Annotation: actAt(at)}}}, metav1.CreateOptions{})
	require.NoError(h.t, err)
	synctest.Wait()
}

// annotate sets the act-at annotation to value, or removes it if value is "".
func (h *harness) annotate(value string) {
	cm, err := h.client.CoreV1().ConfigMaps("ns").Get(context.Background(), "cm", metav1.GetOptions{})
	require.NoError(h.t, err)
	if value == "" {
		delete(cm.Annotations, actat.Annotation)
	} else {
		cm.Annotations[actat.Annotation] = value
	}
	_, err = h.client.CoreV1().ConfigMaps("ns").Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(h.t, err)
	synctest.Wait()
}

func (h *harness) delete() {
	require.NoError(h.t, h.client.CoreV1().ConfigMaps("ns").Delete(context.Background(), "cm", metav1.DeleteOptions{}))
	synctest.Wait()
}

// step moves the clock by d and lets the controller settle.
func (h *harness) step(d time.Duration) {
	h.clk.Step(d)
	synctest.Wait()
}

func (h *harness) acts() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.patches...)
}

func (h *harness) handedOut() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gets
}

// handOuts is a MetricsProvider that counts the keys the queue hands out:
// its latency metric observes one each.
type handOuts struct{ h *harness }

type count struct{ h *harness }

func (c count) Inc()        {}
func (c count) Dec()        {}
func (c count) Set(float64) {}
func (c count) Observe(float64) {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	c.h.gets++
}

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

func (p handOuts) NewDepthMetric(string) clientworkqueue.GaugeMetric            { return noop{} }
func (p handOuts) NewAddsMetric(string) clientworkqueue.CounterMetric           { return noop{} }
func (p handOuts) NewLatencyMetric(string) clientworkqueue.HistogramMetric      { return count(p) }
func (p handOuts) NewWorkDurationMetric(string) clientworkqueue.HistogramMetric { return noop{} }
func (p handOuts) NewUnfinishedWorkSecondsMetric(string) clientworkqueue.SettableGaugeMetric {
	return noop{}
}
func (p handOuts) NewLongestRunningProcessorSecondsMetric(string) clientworkqueue.SettableGaugeMetric {
	return noop{}
}
func (p handOuts) NewRetriesMetric(string) clientworkqueue.CounterMetric { return noop{} }
