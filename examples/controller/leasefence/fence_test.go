package leasefence_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const renewDeadline = 10 * time.Second

// heldClock is a fake clock whose timers never fire: whatever waits on
// them (the fence's goroutine, or one a careless change adds) is held,
// while Now moves with Step.
type heldClock struct{ *testingclock.FakeClock }

func (heldClock) NewTimer(time.Duration) clock.Timer { return heldTimer{} }

type heldTimer struct{}

func (heldTimer) C() <-chan time.Time      { return nil }
func (heldTimer) Stop() bool               { return true }
func (heldTimer) Reset(time.Duration) bool { return true }

// server stands in for the API server behind the fence: it answers every
// request with 200 and an empty object of the kind the path names, and
// records what reached it.
type server struct {
	mu   sync.Mutex
	seen []string
}

func (s *server) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req.Method+" "+req.URL.Path)
	s.mu.Unlock()
	if req.Body != nil {
		req.Body.Close()
	}
	body := `{"kind":"Pod","apiVersion":"v1"}`
	if strings.Contains(req.URL.Path, "/events") {
		body = `{"kind":"Event","apiVersion":"v1"}`
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// clientset returns a clientset whose requests go through f to srv, as the
// controllers' are: the fence wrapped into the rest.Config's transport.
func clientset(t *testing.T, f *leasefence.Fence, srv *server) kubernetes.Interface {
	t.Helper()
	cfg := &rest.Config{Host: "https://apiserver.invalid", Transport: srv}
	cfg.Wrap(f.Wrap)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// The check is made where the request leaves, on the clock the fence
// reads, not by a goroutine that must first notice the deadline: with
// every timer held, a pod write and an event are refused from the instant
// the renew deadline since the last renewal has passed.
func TestWritesRefusedFromRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		f, err := leasefence.New(leasefence.Config{RenewDeadline: renewDeadline, Clock: heldClock{clk}})
		require.NoError(t, err)
		lock := f.Lock(newLeaseStore().lock("replica-a"))
		srv := &server{}
		c := clientset(t, f, srv)
		ctx := t.Context()
		lost := f.Lost(ctx)

		patchStatus := func() error {
			_, err := c.CoreV1().Pods("ns").Patch(ctx, "web", types.StrategicMergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"DisruptionTarget","status":"True"}]}}`), metav1.PatchOptions{}, "status")
			return err
		}
		createEvent := func() error {
			_, err := c.CoreV1().Events("ns").Create(ctx, &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1"}}, metav1.CreateOptions{})
			return err
		}

		require.ErrorIs(t, patchStatus(), leasefence.ErrExpired, "written before any renewal")
		require.NoError(t, lock.Create(ctx, record("replica-a")))
		clk.Step(renewDeadline - time.Nanosecond)
		require.NoError(t, patchStatus(), "a nanosecond before the renew deadline")
		require.NoError(t, createEvent(), "a nanosecond before the renew deadline")
		sent := len(srv.requests())

		clk.Step(time.Nanosecond)
		assert.ErrorIs(t, patchStatus(), leasefence.ErrExpired, "the pod's status patch at the renew deadline")
		assert.ErrorIs(t, createEvent(), leasefence.ErrExpired, "the event at the renew deadline")
		err = c.CoreV1().Pods("ns").Delete(ctx, "web", metav1.DeleteOptions{})
		assert.ErrorIs(t, err, leasefence.ErrExpired, "the delete at the renew deadline")
		assert.Equal(t, sent, len(srv.requests()), "refused requests reached the server: %v", srv.requests()[sent:])

		// Reads and the Lease's own requests pass.
		_, err = c.CoreV1().Pods("ns").Get(ctx, "web", metav1.GetOptions{})
		assert.NoError(t, err)

		// The refusal, not the held timer, tells the replica to stop.
		synctest.Wait()
		select {
		case <-lost:
		default:
			t.Error("Lost not closed after a refused request")
		}

		// A renewal allows writes again.
		require.NoError(t, lock.Update(ctx, record("replica-a")))
		assert.NoError(t, patchStatus(), "after a renewal")
	})
}

// Lost closes when the renew deadline passes on the clock, with no request
// made, and not before; a renewal in between moves it.
func TestLostAtRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		f, err := leasefence.New(leasefence.Config{RenewDeadline: renewDeadline, Clock: clk})
		require.NoError(t, err)
		lock := f.Lock(newLeaseStore().lock("replica-a"))
		require.NoError(t, lock.Create(t.Context(), record("replica-a")))
		lost := f.Lost(t.Context())
		isClosed := func() bool {
			synctest.Wait()
			select {
			case <-lost:
				return true
			default:
				return false
			}
		}

		clk.Step(renewDeadline / 2)
		require.NoError(t, lock.Update(t.Context(), record("replica-a")))
		clk.Step(renewDeadline - time.Nanosecond)
		assert.False(t, isClosed(), "closed before the renew deadline since the last renewal")
		clk.Step(time.Nanosecond)
		assert.True(t, isClosed(), "not closed at the renew deadline since the last renewal")
	})
}

func TestFenced(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"PATCH", "/api/v1/namespaces/ns/pods/web/status", true},
		{"DELETE", "/api/v1/namespaces/ns/pods/web", true},
		{"POST", "/api/v1/namespaces/ns/pods/web/eviction", true},
		{"DELETE", "/api/v1/namespaces/ns/pods", true}, // deletecollection
		{"POST", "/api/v1/namespaces/ns/events", true},
		{"PATCH", "/api/v1/namespaces/ns/events/web.1", true},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", true},
		{"POST", "/prefix/of/the/server/api/v1/namespaces/ns/pods/web/eviction", true},
		{"GET", "/api/v1/namespaces/ns/pods/web", false},
		{"GET", "/api/v1/pods", false},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l", false},
		{"PATCH", "/api/v1/nodes/n", false},
		{"POST", "/api/v1/namespaces/ns/configmaps", false},
		{"POST", "/apis/example.com/v1/namespaces/ns/events", false}, // another group's "events"
		{"PATCH", "/apis/resource.k8s.io/v1/devicetaintrules/r/status", true},
		{"PUT", "/apis/resource.k8s.io/v1/devicetaintrules/r", true},
		{"GET", "/apis/resource.k8s.io/v1/devicetaintrules/r", false},
		{"PATCH", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status", false},
		{"PATCH", "/apis/example.com/v1/devicetaintrules/r", false}, // another group's
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			srv := &server{}
			f, err := leasefence.New(leasefence.Config{RenewDeadline: renewDeadline, Clock: testingclock.NewFakeClock(t0)})
			require.NoError(t, err)
			req, err := http.NewRequest(tc.method, "https://apiserver.invalid"+tc.path, nil)
			require.NoError(t, err)
			_, err = f.Wrap(srv).RoundTrip(req) // no renewal: every fenced request is refused
			if got := err != nil; got != tc.want {
				t.Errorf("%s %s refused = %v, want %v", tc.method, tc.path, got, tc.want)
			}
		})
	}
}

func TestNewRejectsNonPositiveDeadline(t *testing.T) {
	_, err := leasefence.New(leasefence.Config{})
	assert.ErrorContains(t, err, "leasefence: RenewDeadline must be positive, got 0s")
}

func record(holder string) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15}
}
