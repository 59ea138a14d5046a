package actor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/taintkit/taintkit/examples/controller-runtime/actor"
	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
	"github.com/taintkit/taintkit/examples/internal/actat"
)

// slack bounds how late the action may be sent after its time.
const slack = 1500 * time.Millisecond

// Each case changes one ConfigMap's annotation as a user would, and says
// when the controller must act on it: at the time the annotation finally
// gives, or never (zero).
func TestActsOnceOnTime(t *testing.T) {
	h := setup(t)
	for _, tc := range []struct {
		name string
		// run creates and changes the ConfigMap; it returns when it must be
		// acted on, or the zero time if not until stayUntil.
		run func(h *harness, name string) (actAt, stayUntil time.Time)
	}{
		{"set", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			return at, time.Time{}
		}},
		{"already past", func(h *harness, name string) (time.Time, time.Time) {
			now := time.Now()
			h.create(name, now.Add(-time.Hour))
			return now, time.Time{}
		}},
		{"postponed", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			later := at.Add(2 * time.Second)
			h.annotate(name, later.UTC().Format(time.RFC3339Nano))
			return later, time.Time{}
		}},
		{"brought earlier", func(h *harness, name string) (time.Time, time.Time) {
			h.create(name, time.Now().Add(time.Hour))
			earlier := time.Now().Add(2 * time.Second)
			h.annotate(name, earlier.UTC().Format(time.RFC3339Nano))
			return earlier, time.Time{}
		}},
		{"deleted", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			require.NoError(h.t, h.c.Delete(h.ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}))
			return time.Time{}, at.Add(2 * time.Second)
		}},
		{"annotation removed", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			h.annotate(name, "")
			return time.Time{}, at.Add(2 * time.Second)
		}},
		{"invalid time", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			h.annotate(name, "tomorrow")
			return time.Time{}, at.Add(2 * time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := h.sub(t)
			name := testenv.Name("cm")
			actAt, stayUntil := tc.run(h, name)
			h.check(name, actAt, stayUntil)
		})
	}
}

// Once acted on, a ConfigMap is not acted on again for the same time,
// whatever else changes; a new time is acted on at that time.
func TestActsAgainOnlyForANewTime(t *testing.T) {
	h := setup(t)
	name := testenv.Name("cm")
	at := time.Now().Add(time.Second)
	h.create(name, at)
	h.check(name, at, time.Time{})
	var cm v1.ConfigMap
	require.NoError(t, h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &cm))
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Labels = map[string]string{"changed": "yes"}
	require.NoError(t, h.c.Patch(h.ctx, &cm, patch))
	again := time.Now().Add(2 * time.Second)
	h.annotate(name, again.UTC().Format(time.RFC3339Nano))
	h.waitUntil(again.Add(slack))
	acts := h.run.acts(name)
	require.Len(t, acts, 2, "acted on %v", acts)
	assert.False(t, acts[1].Before(again), "acted %v early", again.Sub(acts[1]))
	assert.LessOrEqual(t, acts[1].Sub(again), slack, "acted late")
	assert.Equal(t, 2, h.run.reconciles(name), "reconciled for nothing")
}

// harness is a test's namespace on the shared API server, with an admin
// client that reads from the server, and the manager running the
// controller.
type harness struct {
	t   *testing.T
	ctx context.Context
	cfg *rest.Config
	c   client.WithWatch
	ns  string
	run *run
}

func setup(t *testing.T) *harness {
	cfg := testenv.Config(t)
	c, err := client.NewWithWatch(cfg, client.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := testenv.Name("actor")
	require.NoError(t, c.Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	h := &harness{t: t, ctx: ctx, cfg: cfg, c: c, ns: ns}
	h.run = h.start()
	return h
}

// sub is h for a subtest.
func (h *harness) sub(t *testing.T) *harness {
	s := *h
	s.t = t
	return &s
}

// run is a manager running the controller; its client records, by
// ConfigMap name, the reads of Reconcile and the times of the actions.
type run struct {
	mu    sync.Mutex
	gets  map[string]int
	times map[string][]time.Time
}

func (r *run) reconciles(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[name]
}

func (r *run) acts(name string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times[name]...)
}

// start starts a manager with the controller, without leader election,
// and returns once its caches have synced.
func (h *harness) start() *run {
	t := h.t
	r := &run{gets: map[string]int{}, times: map[string][]time.Time{}}
	mgr, err := ctrl.NewManager(h.cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Each test starts a manager: each registers the controller's name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*v1.ConfigMap); ok && key.Namespace == h.ns {
						r.mu.Lock()
						r.gets[key.Name]++
						r.mu.Unlock()
					}
					return c.Get(ctx, key, obj, opts...)
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					sent := time.Now()
					err := c.Patch(ctx, obj, patch, opts...)
					if _, ok := obj.(*v1.ConfigMap); ok && err == nil {
						r.mu.Lock()
						r.times[obj.GetName()] = append(r.times[obj.GetName()], sent)
						r.mu.Unlock()
					}
					return err
				},
			}), nil
		},
	})
	require.NoError(t, err)
	require.NoError(t, (&actor.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "manager.Start")
		case <-time.After(time.Minute):
			t.Error("the manager did not stop within a minute")
		}
	})
	syncCtx, cancelSync := context.WithTimeout(h.ctx, time.Minute)
	defer cancelSync()
	require.True(t, mgr.GetCache().WaitForCacheSync(syncCtx), "caches never synced")
	return r
}

func (h *harness) create(name string, at time.Time) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name,
		Annotations: map[string]string{actat.Annotation: at.UTC().Format(time.RFC3339Nano)}}}
	require.NoError(h.t, h.c.Create(h.ctx, cm))
}

// annotate sets the act-at annotation to value, or removes it if value is "".
func (h *harness) annotate(name, value string) {
	var cm v1.ConfigMap
	require.NoError(h.t, h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &cm))
	patch := client.MergeFrom(cm.DeepCopy())
	if value == "" {
		delete(cm.Annotations, actat.Annotation)
	} else {
		cm.Annotations[actat.Annotation] = value
	}
	require.NoError(h.t, h.c.Patch(h.ctx, &cm, patch))
}

// check checks that the controller acted on the ConfigMap once, at actAt
// (not before it, within slack after it), reconciling it once; or, if actAt
// is zero, that it neither acted nor reconciled by stayUntil.
func (h *harness) check(name string, actAt, stayUntil time.Time) {
	h.t.Helper()
	if actAt.IsZero() {
		h.waitUntil(stayUntil)
		assert.Empty(h.t, h.run.acts(name), "acted")
		assert.Zero(h.t, h.run.reconciles(name), "reconciled for nothing")
		return
	}
	h.waitActed(name)
	h.waitUntil(actAt.Add(slack)) // a second action would have come by then
	acts := h.run.acts(name)
	require.Len(h.t, acts, 1, "acted on %v", acts)
	h.t.Logf("%s: acted %+.3f s after its time", name, acts[0].Sub(actAt).Seconds())
	assert.False(h.t, acts[0].Before(actAt), "acted %v early", actAt.Sub(acts[0]))
	assert.LessOrEqual(h.t, acts[0].Sub(actAt), slack, "acted late")
	assert.Equal(h.t, 1, h.run.reconciles(name), "reconciled for nothing")
}

// waitActed waits until the API server shows the ConfigMap acted on.
func (h *harness) waitActed(name string) {
	h.t.Helper()
	require.NoError(h.t, testenv.WaitFor(h.ctx, h.c, &v1.ConfigMapList{}, func(ev watch.Event) bool {
		cm, ok := ev.Object.(*v1.ConfigMap)
		return ok && cm.Annotations[actat.ActedAnnotation] != ""
	}, testenv.Named(h.ns, name)...), "ConfigMap %s/%s never acted on", h.ns, name)
}

// waitUntil waits until the wall clock reaches at.
func (h *harness) waitUntil(at time.Time) {
	select {
	case <-time.After(time.Until(at)):
	case <-h.ctx.Done():
		h.t.Fatal(h.ctx.Err())
	}
}
