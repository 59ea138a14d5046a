package expiry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/taintkit/taintkit/examples/controller-runtime/expiry"
	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
)

// slack bounds how late the DELETE may be sent after the expiry time.
const slack = 1500 * time.Millisecond

// Each case changes one ConfigMap's annotation as a user would, and says
// when the controller must delete it: at the time the annotation finally
// gives, or never (zero).
func TestExpiry(t *testing.T) {
	h := setup(t, "expiry")
	h.start()
	for _, tc := range []struct {
		name string
		// run creates and changes the ConfigMap; it returns when it must be
		// deleted, or the zero time if it must stay until stayUntil.
		run func(h *harness, name string) (deleteAt, stayUntil time.Time)
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
		{"moved later", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			later := at.Add(3 * time.Second)
			h.annotate(name, &later)
			// No wake-up at the old time: the schedule itself moved.
			h.waitUntil(at.Add(500 * time.Millisecond))
			next, ok := h.last.r.Scheduled(types.NamespacedName{Namespace: h.ns, Name: name})
			assert.True(h.t, ok && next.Equal(later), "scheduled at %v (%v), want %v", next, ok, later)
			return later, time.Time{}
		}},
		{"moved earlier", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(time.Hour)
			h.create(name, at)
			earlier := time.Now().Add(2 * time.Second)
			h.annotate(name, &earlier)
			return earlier, time.Time{}
		}},
		{"annotation removed", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			h.annotate(name, nil)
			h.waitUntil(at.Add(-500 * time.Millisecond))
			_, ok := h.last.r.Scheduled(types.NamespacedName{Namespace: h.ns, Name: name})
			assert.False(h.t, ok, "still scheduled")
			return time.Time{}, at.Add(2 * time.Second)
		}},
		{"removed and set again", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			h.annotate(name, nil)
			again := at.Add(2 * time.Second)
			h.annotate(name, &again)
			return again, time.Time{}
		}},
		{"invalid time", func(h *harness, name string) (time.Time, time.Time) {
			at := time.Now().Add(2 * time.Second)
			h.create(name, at)
			h.setAnnotation(name, "tomorrow")
			return time.Time{}, at.Add(2 * time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := h.sub(t)
			name := tc.name
			deleteAt, stayUntil := tc.run(h, configMapName(name))
			h.check(configMapName(name), deleteAt, stayUntil)
		})
	}
}

// The schedules live in memory: a new manager (a restart, or a new leader)
// rebuilds them from the annotations by its initial list. A ConfigMap
// scheduled by the first manager is deleted by the second at its time; one
// whose time passed while no manager ran is deleted at once.
func TestExpiryAfterRestart(t *testing.T) {
	h := setup(t, "expiry-restart")
	first := h.start()
	passed := time.Now().Add(time.Second)
	h.create("passes-while-down", passed)
	at := time.Now().Add(4 * time.Second)
	h.create("after-restart", at)
	first.stop(t)
	_, deleted := first.deleted("passes-while-down")
	require.False(t, deleted, "the first manager deleted before its time: the test proves nothing")
	require.True(t, time.Now().Before(at.Add(-time.Second)), "too slow to stop: the test proves nothing")
	h.waitUntil(passed.Add(100 * time.Millisecond))

	restarted := time.Now()
	second := h.start()
	h.checkBy(second, "passes-while-down", restarted, time.Time{})
	h.checkBy(second, "after-restart", at, time.Time{})
	_, byFirst := first.deleted("after-restart")
	assert.False(t, byFirst)
}

func configMapName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ' ' {
			b[i] = '-'
		}
	}
	return string(b)
}

// harness is a test's namespace on the shared API server, with an admin
// client that reads from the server.
type harness struct {
	t    *testing.T
	ctx  context.Context
	cfg  *rest.Config
	c    client.WithWatch
	ns   string
	last *run // the manager of the last start, for check
}

func setup(t *testing.T, ns string) *harness {
	cfg := testenv.Config(t)
	c, err := client.NewWithWatch(cfg, client.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns = testenv.Name(ns)
	require.NoError(t, c.Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	return &harness{t: t, ctx: ctx, cfg: cfg, c: c, ns: ns}
}

// sub is h for a subtest.
func (h *harness) sub(t *testing.T) *harness {
	s := *h
	s.t = t
	return &s
}

// run is a manager running the expiry controller; its client records
// the DELETEs of ConfigMaps it sends.
type run struct {
	r      *expiry.Reconciler
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	deletes map[string]time.Time
}

// start starts a manager with the expiry controller, without leader
// election, and returns once its caches have synced.
func (h *harness) start() *run {
	t := h.t
	r := &run{done: make(chan error, 1), deletes: map[string]time.Time{}}
	mgr, err := ctrl.NewManager(h.cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
		// A restart in the same process registers the controller's name again.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if _, ok := obj.(*v1.ConfigMap); ok {
						r.mu.Lock()
						r.deletes[obj.GetName()] = time.Now()
						r.mu.Unlock()
					}
					return c.Delete(ctx, obj, opts...)
				},
			}), nil
		},
	})
	require.NoError(t, err)
	r.r = &expiry.Reconciler{Client: mgr.GetClient()}
	require.NoError(t, r.r.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	syncCtx, cancelSync := context.WithTimeout(h.ctx, time.Minute)
	defer cancelSync()
	require.True(t, mgr.GetCache().WaitForCacheSync(syncCtx), "caches never synced")
	h.last = r
	return r
}

func (r *run) stop(t *testing.T) {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			require.NoError(t, err, "manager.Start")
			close(r.done)
		}
	case <-time.After(time.Minute):
		t.Error("the manager did not stop within a minute")
	}
}

func (r *run) deleted(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.deletes[name]
	return at, ok
}

func (h *harness) create(name string, at time.Time) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name,
		Annotations: map[string]string{expiry.Annotation: at.UTC().Format(time.RFC3339Nano)}}}
	require.NoError(h.t, h.c.Create(h.ctx, cm))
}

// annotate sets the annotation to at, or removes it if at is nil.
func (h *harness) annotate(name string, at *time.Time) {
	if at == nil {
		h.setAnnotation(name, "")
		return
	}
	h.setAnnotation(name, at.UTC().Format(time.RFC3339Nano))
}

// setAnnotation sets the annotation's value, or removes it if value is "".
func (h *harness) setAnnotation(name, value string) {
	var cm v1.ConfigMap
	require.NoError(h.t, h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &cm))
	patch := client.MergeFrom(cm.DeepCopy())
	if value == "" {
		delete(cm.Annotations, expiry.Annotation)
	} else {
		cm.SetAnnotations(map[string]string{expiry.Annotation: value})
	}
	require.NoError(h.t, h.c.Patch(h.ctx, &cm, patch))
}

// check checks that the last started manager deleted the ConfigMap at
// deleteAt (not before it, within slack after it), or, if deleteAt is
// zero, that it is still there at stayUntil.
func (h *harness) check(name string, deleteAt, stayUntil time.Time) {
	h.checkBy(h.last, name, deleteAt, stayUntil)
}

func (h *harness) checkBy(r *run, name string, deleteAt, stayUntil time.Time) {
	h.t.Helper()
	if deleteAt.IsZero() {
		h.waitUntil(stayUntil)
		var cm v1.ConfigMap
		assert.NoError(h.t, h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &cm), "deleted, but had to stay")
		_, ok := r.deleted(name)
		assert.False(h.t, ok, "a DELETE was sent")
		return
	}
	h.waitGone(name, time.Until(deleteAt)+30*time.Second)
	sent, ok := r.deleted(name)
	require.True(h.t, ok, "gone, but not by this manager's DELETE")
	h.t.Logf("%s: DELETE %+.3f s after the expiry time", name, sent.Sub(deleteAt).Seconds())
	assert.False(h.t, sent.Before(deleteAt), "deleted %v early", deleteAt.Sub(sent))
	assert.LessOrEqual(h.t, sent.Sub(deleteAt), slack, "deleted late")
}

// waitUntil waits until the wall clock reaches at.
func (h *harness) waitUntil(at time.Time) {
	select {
	case <-time.After(time.Until(at)):
	case <-h.ctx.Done():
		h.t.Fatal(h.ctx.Err())
	}
}

// waitGone waits until the ConfigMap is gone.
func (h *harness) waitGone(name string, timeout time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, timeout)
	defer cancel()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	require.NoError(h.t, testenv.WaitDeleted(ctx, h.c, &v1.ConfigMapList{}, cm), "ConfigMap %s/%s not deleted", h.ns, name)
}
