package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// The controller's ServiceAccount and Lease, as deploy/ names them.
const (
	saNamespace = "kube-system"
	saName      = "taintkit-noexecute"
)

// testTimeout bounds each test. The longest waits about 12 s on the clock;
// reaching it means something never happened.
const testTimeout = 60 * time.Second

var rbacOnce struct {
	sync.Once
	err error
}

// applyRBAC applies deploy/'s ServiceAccount and RBAC (not the Deployment:
// the controller runs in the test process) once per test binary, and waits
// until the authorizer allows the ServiceAccount each kind of call the
// controller makes.
func applyRBAC(ctx context.Context, env *testenv.Env) error {
	rbacOnce.Do(func() {
		// The base RBAC, the Eviction API's (of the eviction-api
		// components: these tests use both ways of evicting), the device
		// taints' (of the device-taints component: the device tests run
		// --device-taints) and the metrics server's readers.
		if _, err := env.ApplyManifests(ctx, "../deploy/serviceaccount.yaml", "../deploy/rbac.yaml",
			"../deploy/components/eviction-api-permission/rbac.yaml", "../deploy/components/device-taints/rbac.yaml",
			"../deploy/readers.yaml"); err != nil {
			rbacOnce.err = err
			return
		}
		cfg := env.ImpersonatedConfig(saNamespace, saName)
		for _, attrs := range []authorizationv1.ResourceAttributes{
			{Verb: "list", Resource: "nodes"},
			{Verb: "watch", Resource: "pods"},
			{Verb: "delete", Resource: "pods"},
			{Verb: "patch", Resource: "pods", Subresource: "status"},
			{Verb: "create", Resource: "pods", Subresource: "eviction"},
			{Verb: "create", Resource: "events"},
			{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: saNamespace},
			{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: saNamespace, Name: saName},
			{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
			{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
			{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceslices"},
			{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceclaims"},
			{Verb: "watch", Group: "resource.k8s.io", Resource: "devicetaintrules"},
			{Verb: "patch", Group: "resource.k8s.io", Resource: "devicetaintrules", Subresource: "status"},
		} {
			if err := testenv.WaitForAccess(ctx, cfg, attrs); err != nil {
				rbacOnce.err = err
				return
			}
		}
	})
	return rbacOnce.err
}

// harness is one test's view of the cluster: the admin client, its
// namespace and a context bounded by testTimeout.
type harness struct {
	t      *testing.T
	env    *testenv.Env
	c      kubernetes.Interface
	ctx    context.Context
	ns     string
	oracle *oracle.Oracle // checks the controller's writes at the test's end

	verifyOnce sync.Once
	report     *oracle.Report
}

// setup creates namespace ns and starts a PodFinaliser (the kubelet
// stand-in) for it, and an oracle that checks, from the API server's audit
// log and its own watch, every write of the controller to the namespace's
// pods once the controller has stopped. At the end of the test it deletes
// the namespace's pods at once and the given nodes, so that the next test's
// controller does not meet them.
func setup(t *testing.T, ns string) *harness {
	t.Helper()
	return setupNamespace(t, ns, true)
}

// setupNamespace is setup, with or without the oracle.
func setupNamespace(t *testing.T, ns string, withOracle bool) *harness {
	t.Helper()
	return setupFor(t, ns, withOracle, testTimeout)
}

// setupFor is setupNamespace for a test that may take up to timeout.
func setupFor(t *testing.T, ns string, withOracle bool, timeout time.Duration) *harness {
	t.Helper()
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	c := env.Client()
	require.NoError(t, applyRBAC(ctx, env))
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f, err := testenv.StartPodFinaliser(ctx, c, ns)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.Stop(), "the kubelet stand-in failed to finish a deletion") })
	h := &harness{t: t, env: env, c: c, ctx: ctx, ns: ns}
	if withOracle {
		h.oracle, err = oracle.Start(ctx, oracle.Options{Client: c, AuditLog: env.AuditLogPath(), Namespace: ns})
		require.NoError(t, err)
		t.Cleanup(func() { h.verify() }) // after the controller stopped (cleanups run last first)
	}
	t.Cleanup(func() {
		// The test's ctx may be over; cleaning up gets its own.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		zero := int64(0)
		assert.NoError(t, c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}))
		assert.NoError(t, c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "test-namespace=" + ns}))
	})
	return h
}

// verify has the oracle check the controller's writes, once (the test's
// end does it if the test has not), and returns its report. A test that
// reads the report stops its controllers first.
func (h *harness) verify() *oracle.Report {
	h.verifyOnce.Do(func() { h.report = h.oracle.Verify(h.t) })
	return h.report
}

// node creates a node named after the test's namespace and suffix, labelled
// for clean-up, with taints.
func (h *harness) node(suffix string, taints ...corev1.Taint) string {
	h.t.Helper()
	name := h.ns + "-" + suffix
	_, err := testenv.CreateNode(h.ctx, h.c, name, taints...)
	require.NoError(h.t, err)
	_, err = h.c.CoreV1().Nodes().Patch(h.ctx, name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"test-namespace":"`+h.ns+`"}}}`), metav1.PatchOptions{})
	require.NoError(h.t, err)
	return name
}

// controller is a Run of the controller in this process.
type controller struct {
	identity    string
	registry    *prometheus.Registry
	calls       *callRecorder
	metricsAddr string // host:port of its metrics server (and /debug/evictions), HTTPS
	healthAddr  string // host:port of its /healthz and /readyz server

	mu      sync.Mutex
	deletes map[types.UID]time.Time // first BeforeDelete per pod UID

	stopOnce sync.Once
	stopRun  func(t *testing.T) // cancels Run's ctx and checks how it returned
}

// stop stops the Run (SIGTERM's way: its ctx is cancelled) and checks that
// it returned nil within 30 s; the test's end does it if the test does not.
func (ctrl *controller) stop(t *testing.T) {
	ctrl.stopOnce.Do(func() { ctrl.stopRun(t) })
}

// startController runs app.Run as the ServiceAccount until the end of the
// test, and checks then that it returned nil and that the API server
// refused none of its calls as forbidden. With leaderElect it returns once
// the Run holds the Lease (its manager starts right after). beforeDelete,
// if not nil, is called from Options.BeforeDelete after the controller
// records the time. configure, if any, changes the options last.
func (h *harness) startController(leaderElect bool, beforeDelete func(ctx context.Context, pod *corev1.Pod), configure ...func(*app.Options)) *controller {
	t := h.t
	t.Helper()
	ctrl := &controller{
		registry: prometheus.NewRegistry(),
		calls:    newCallRecorder(),
		deletes:  make(map[types.UID]time.Time),
	}
	o := app.NewOptions()
	ctrl.identity = o.Identity
	o.LeaderElect = leaderElect
	// Short, so that a lease a crashed test left behind expires quickly;
	// a released lease is taken at once.
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	o.MetricsBindAddress, o.HealthProbeBindAddress = "127.0.0.1:0", "127.0.0.1:0"
	o.ShutdownGracePeriod = 5 * time.Second
	o.Registry = ctrl.registry
	o.BeforeDelete = func(ctx context.Context, pod *corev1.Pod) {
		now := time.Now()
		ctrl.mu.Lock()
		if _, ok := ctrl.deletes[pod.UID]; !ok {
			ctrl.deletes[pod.UID] = now
		}
		ctrl.mu.Unlock()
		if beforeDelete != nil {
			beforeDelete(ctx, pod)
		}
	}

	listening := make(chan [2]net.Addr, 1)
	o.Listening = func(metrics, health net.Addr) { listening <- [2]net.Addr{metrics, health} }
	for _, f := range configure {
		f(&o)
	}

	cfg := h.env.ImpersonatedConfig(saNamespace, saName)
	cfg.WrapTransport = ctrl.calls.wrap

	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	ctx = klog.NewContext(ctx, logger)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg, o) }()
	select {
	case addrs := <-listening:
		ctrl.metricsAddr, ctrl.healthAddr = addrs[0].String(), addrs[1].String()
	case err := <-done:
		cancel()
		t.Fatalf("Run returned before it listened: %v", err)
	}
	ctrl.stopRun = func(t *testing.T) {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "Run's result after its ctx was cancelled")
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30 s of its ctx being cancelled")
		}
		assert.Empty(t, ctrl.calls.forbiddenCalls(), "calls the API server refused the ServiceAccount")
	}
	t.Cleanup(func() { ctrl.stop(t) })
	if leaderElect {
		require.NoError(t, waitForLeader(h.ctx, h.c, ctrl.identity))
	}
	return ctrl
}

// debugEvictions reads the controller's /debug/evictions.
func (ctrl *controller) debugEvictions(t *testing.T) []app.PendingEvictionJSON {
	t.Helper()
	code, body := ctrl.get(t, app.DebugEvictionsPath, readerToken(t, evictionsReader))
	require.Equal(t, http.StatusOK, code, body)
	var list []app.PendingEvictionJSON
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	return list
}

// deleteCalled returns when the controller was about to DELETE the pod
// with uid (its first try), and whether it ever was.
func (ctrl *controller) deleteCalled(uid types.UID) (time.Time, bool) {
	ctrl.mu.Lock()
	defer ctrl.mu.Unlock()
	at, ok := ctrl.deletes[uid]
	return at, ok
}

// evictions returns taintkit_evictions_total{outcome} from the Run's
// registry.
func (ctrl *controller) evictions(t *testing.T, outcome string) float64 {
	t.Helper()
	return metricValue(t, ctrl.registry, kube.MetricEvictions, "outcome", outcome)
}

func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" || hasLabel(m, label, value) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				}
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// waitForLeader waits until the Lease names identity as its holder.
func waitForLeader(ctx context.Context, c kubernetes.Interface, identity string) error {
	sel := fields.OneTermEqualSelector("metadata.name", saName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.CoordinationV1().Leases(saNamespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.CoordinationV1().Leases(saNamespace).Watch(ctx, o)
		},
	}
	holds := func(obj any) bool {
		l, ok := obj.(*coordinationv1.Lease)
		return ok && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &coordinationv1.Lease{},
		func(store cache.Store) (bool, error) {
			for _, obj := range store.List() {
				if holds(obj) {
					return true, nil
				}
			}
			return false, nil
		},
		func(ev watch.Event) (bool, error) { return ev.Type != watch.Deleted && holds(ev.Object), nil })
	if err != nil {
		return fmt.Errorf("waiting for %s to hold the lease: %w", identity, err)
	}
	return nil
}

// callRecorder sees every response the API server gives the controller's
// clients (the informers', the manager's and the leader election's).
type callRecorder struct {
	mu        sync.Mutex
	forbidden []string      // refused by RBAC
	denied    []string      // refused by an admission policy, as a test may arrange
	conflicts []string      // DELETEs of pods refused with 409 Conflict
	conflict  chan struct{} // closed at the first of them
	// Evictions (POST pods/<name>/eviction) by pod name: the times of
	// those the server accepted (201) and of its refusals for a
	// disruption budget (429 with the DisruptionBudget cause).
	evicted, refused map[string][]time.Time
	// deletes holds the time of each DELETE of a pod, by name.
	deletes map[string][]time.Time
	// writes lists every call but GET, LIST and WATCH to pods.
	podWrites []string
	changed   chan struct{} // closed and replaced at each eviction or refusal
}

func newCallRecorder() *callRecorder {
	return &callRecorder{
		conflict: make(chan struct{}),
		evicted:  map[string][]time.Time{},
		refused:  map[string][]time.Time{},
		deletes:  map[string][]time.Time{},
		changed:  make(chan struct{}),
	}
}

func (r *callRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		call := req.Method + " " + req.URL.Path
		now := time.Now()
		var budgetCause bool
		if resp.StatusCode == http.StatusTooManyRequests && resp.Body != nil {
			// Peek: the caller reads the body after us.
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			var status metav1.Status
			if json.Unmarshal(body, &status) == nil {
				budgetCause = manager.IsRefusedByBudget(&apierrors.StatusError{ErrStatus: status})
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if pod, sub, ok := podPath(req.URL.Path); ok && req.Method != http.MethodGet {
			r.podWrites = append(r.podWrites, call)
			switch {
			case sub == "eviction" && resp.StatusCode == http.StatusCreated:
				r.evicted[pod] = append(r.evicted[pod], now)
				r.notifyLocked()
			case sub == "eviction" && budgetCause:
				r.refused[pod] = append(r.refused[pod], now)
				r.notifyLocked()
			case sub == "" && req.Method == http.MethodDelete:
				r.deletes[pod] = append(r.deletes[pod], now)
			}
		}
		switch {
		case resp.StatusCode == http.StatusForbidden && admissionDenial(resp):
			r.denied = append(r.denied, call)
		case resp.StatusCode == http.StatusForbidden:
			r.forbidden = append(r.forbidden, call)
		case resp.StatusCode == http.StatusConflict && req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/pods/"):
			if len(r.conflicts) == 0 {
				close(r.conflict)
			}
			r.conflicts = append(r.conflicts, call)
		}
		return resp, err
	})
}

// admissionDenial reports whether a 403 answer is an admission policy's
// denial rather than RBAC's (peeking at the body, which the caller reads
// after).
func admissionDenial(resp *http.Response) bool {
	if resp.Body == nil {
		return false
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return bytes.Contains(body, []byte("ValidatingAdmissionPolicy"))
}

func (r *callRecorder) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// podPath returns the pod and subresource of a path
// /api/v1/namespaces/<ns>/pods/<name>[/<subresource>].
func podPath(path string) (pod, subresource string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) < 6 || parts[0] != "api" || parts[2] != "namespaces" || parts[4] != "pods" {
		return "", "", false
	}
	if len(parts) > 6 {
		subresource = parts[6]
	}
	return parts[5], subresource, true
}

// waitEvictions waits until done, given the evictions the server accepted
// and refused so far (copies), returns true, or ctx ends.
func (r *callRecorder) waitEvictions(ctx context.Context, done func(evicted, refused map[string][]time.Time) bool) error {
	for {
		r.mu.Lock()
		ok := done(maps.Clone(r.evicted), maps.Clone(r.refused))
		changed := r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// evictionCalls returns copies of the accepted evictions, the refusals
// and the deletes, by pod name, and the list of pod writes.
func (r *callRecorder) evictionCalls() (evicted, refused, deletes map[string][]time.Time, writes []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.evicted), maps.Clone(r.refused), maps.Clone(r.deletes), slices.Clone(r.podWrites)
}

func (r *callRecorder) forbiddenCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.forbidden...)
}

func (r *callRecorder) conflictCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.conflicts...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
