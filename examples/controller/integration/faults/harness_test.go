package faults_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// The controller's ServiceAccount and Lease, as deploy/ names them.
const (
	saNamespace = "kube-system"
	saName      = "taintkit-noexecute"
)

// cluster is one test's API server, namespace, kubelet stand-in and oracle.
type cluster struct {
	t      *testing.T
	env    *testenv.Env
	c      kubernetes.Interface
	ctx    context.Context
	ns     string
	oracle *oracle.Oracle
	// token is allowed /debug/evictions on the replicas' metrics servers
	// (deploy/readers.yaml), which serve HTTPS to authorized clients.
	token string
}

// newCluster starts servers of the test's own with the given extra flags,
// applies deploy/'s ServiceAccount and RBAC, creates the namespace, a
// kubelet stand-in and an oracle, which checks everything once the test's
// replicas have stopped (cleanups run last first). ctx ends after timeout.
func newCluster(t *testing.T, timeout time.Duration, apiserverFlags ...string) *cluster {
	t.Helper()
	env := testenv.ForTest(t, testenv.Options{APIServerFlags: apiserverFlags})
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	c := env.Client()
	_, err := env.ApplyManifests(ctx, "../../deploy/serviceaccount.yaml", "../../deploy/rbac.yaml", "../../deploy/readers.yaml")
	require.NoError(t, err)
	sa := env.ImpersonatedConfig(saNamespace, saName)
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "watch", Resource: "pods"},
		{Verb: "delete", Resource: "pods"},
		{Verb: "patch", Resource: "pods", Subresource: "status"},
		{Verb: "create", Resource: "events"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: saNamespace, Name: saName},
		{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
		{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	} {
		require.NoError(t, testenv.WaitForAccess(ctx, sa, attrs))
	}
	token, err := env.ServiceAccountToken(ctx, "readers", "evictions-reader", "taintkit-noexecute-evictions-reader")
	require.NoError(t, err)
	const ns = "faults"
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f, err := testenv.StartPodFinaliser(ctx, c, ns)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.Stop(), "the kubelet stand-in failed a deletion") })
	o, err := oracle.Start(ctx, oracle.Options{Client: c, AuditLog: env.AuditLogPath(), Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(func() { o.Verify(t) })
	return &cluster{t: t, env: env, c: c, ctx: ctx, ns: ns, oracle: o, token: token}
}

// controllerConfig is the ServiceAccount's config, reaching the API server
// at host (a proxy's 127.0.0.1:port) if it is not empty.
func (cl *cluster) controllerConfig(host string) *rest.Config {
	cfg := cl.env.ImpersonatedConfig(saNamespace, saName)
	if host != "" {
		cfg.Host = "https://" + host
	}
	return cfg
}

// replica is one replica of the controller: app.Run in this process, run
// again by a supervisor (as a Deployment restarts a container) each time it
// returns an error, with a new identity, until the test ends.
type replica struct {
	name  string
	t     *testing.T
	token string // the cluster's, for /debug/evictions

	mu       sync.Mutex
	identity string // the current run's
	metrics  string // host:port of the current run's metrics server
	registry *prometheus.Registry
	exits    []exit // the runs that ended with an error
	changed  chan struct{}
}

// exit is a run that returned an error, as the process would have exited.
type exit struct {
	identity string
	err      error
	at       time.Time
}

// startReplica starts a replica against cfg with lease duration, renew
// deadline and retry period, and configure applied last.
func (cl *cluster) startReplica(name string, cfg *rest.Config, lease, renew, retry time.Duration, configure ...func(*app.Options)) *replica {
	t := cl.t
	r := &replica{name: name, t: t, token: cl.token, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	started := make(chan struct{})
	go func() {
		defer close(done)
		for run := 1; ; run++ {
			o := app.NewOptions()
			o.Identity = fmt.Sprintf("%s-%d", name, run)
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = lease, renew, retry
			o.MetricsBindAddress, o.HealthProbeBindAddress = "127.0.0.1:0", "0"
			o.ShutdownGracePeriod = 5 * time.Second
			o.Registry = prometheus.NewRegistry()
			listening := make(chan struct{})
			o.Listening = func(metrics, _ net.Addr) {
				r.mu.Lock()
				r.metrics = metrics.String()
				r.mu.Unlock()
				close(listening)
			}
			for _, f := range configure {
				f(&o)
			}
			r.mu.Lock()
			r.identity, r.registry = o.Identity, o.Registry
			r.mu.Unlock()
			logger, _ := ktesting.NewTestContext(t)
			runCtx := klog.NewContext(ctx, klog.LoggerWithName(logger, o.Identity))
			errc := make(chan error, 1)
			go func() { errc <- app.Run(runCtx, cfg, o) }()
			if run == 1 {
				select {
				case <-listening:
				case err := <-errc:
					t.Errorf("%s: Run returned before it listened: %v", o.Identity, err)
					close(started)
					return
				}
				close(started)
			}
			err := <-errc
			if err == nil || ctx.Err() != nil {
				if err != nil {
					t.Errorf("%s: Run's result after its ctx was cancelled: %v", o.Identity, err)
				}
				return
			}
			// main exits 1 on any error; the supervisor starts it again.
			t.Logf("%s exited (code 1: %v); starting it again", o.Identity, err)
			r.mu.Lock()
			r.exits = append(r.exits, exit{identity: o.Identity, err: err, at: time.Now()})
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	<-started
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30 s of its ctx being cancelled", name)
		}
	})
	return r
}

// Identity is the current run's leader election identity.
func (r *replica) Identity() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.identity
}

// Exits returns the runs that ended with an error so far.
func (r *replica) Exits() []exit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exit(nil), r.exits...)
}

// waitExit waits until the replica has exited n times.
func (r *replica) waitExit(ctx context.Context, n int) ([]exit, error) {
	for {
		r.mu.Lock()
		exits, changed := append([]exit(nil), r.exits...), r.changed
		r.mu.Unlock()
		if len(exits) >= n {
			return exits, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return exits, fmt.Errorf("%s: %d exits, waiting for %d: %w", r.name, len(exits), n, ctx.Err())
		}
	}
}

// metric returns a counter's or gauge's value from the current run.
func (r *replica) metric(name string, labels map[string]string) float64 {
	r.mu.Lock()
	reg := r.registry
	r.mu.Unlock()
	families, err := reg.Gather()
	require.NoError(r.t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// insecureClient does not verify the metrics server's certificate, which
// is self-signed.
var insecureClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// debugEvictions reads the current run's /debug/evictions, over HTTPS with
// a token allowed to.
func (r *replica) debugEvictions(ctx context.Context) ([]app.PendingEvictionJSON, error) {
	r.mu.Lock()
	addr := r.metrics
	r.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+app.DebugEvictionsPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := insecureClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	var list []app.PendingEvictionJSON
	return list, json.NewDecoder(resp.Body).Decode(&list)
}

// countdowns creates node with a NoExecute taint stamped now and n pods
// bound to it, the i-th tolerating the taint for first + i×step seconds,
// and returns the pods and the taint's TimeAdded.
func (cl *cluster) countdowns(node string, n int, first, step time.Duration) ([]*corev1.Pod, time.Time) {
	t := cl.t
	t.Helper()
	taint := testenv.NoExecuteTaint("example.com/fault", "true")
	_, err := testenv.CreateNode(cl.ctx, cl.c, node, taint)
	require.NoError(t, err)
	pods := make([]*corev1.Pod, n)
	for i := range n {
		secs := int64((first + time.Duration(i)*step) / time.Second)
		pods[i], err = testenv.CreateBoundPod(cl.ctx, cl.c, testenv.NewPod(cl.ns, fmt.Sprintf("%s-%02d", node, i), corev1.Toleration{
			Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(secs),
		}), node)
		require.NoError(t, err)
	}
	return pods, taint.TimeAdded.Time
}

// deadlineOf is the pod's deadline under a taint added at added: the later
// of added and its PodScheduled time, plus its toleration's seconds.
func deadlineOf(pod *corev1.Pod, added time.Time) time.Time {
	start := added
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.LastTransitionTime.After(start) {
			start = c.LastTransitionTime.Time
		}
	}
	for _, tol := range pod.Spec.Tolerations {
		if tol.Key == "example.com/fault" && tol.TolerationSeconds != nil {
			return start.Add(time.Duration(*tol.TolerationSeconds) * time.Second)
		}
	}
	return start
}

// sleepUntil waits until t or the test's ctx ends.
func (cl *cluster) sleepUntil(t time.Time) {
	cl.t.Helper()
	select {
	case <-time.After(time.Until(t)):
	case <-cl.ctx.Done():
		cl.t.Fatalf("waiting until %s: %v", t.Format(time.RFC3339Nano), cl.ctx.Err())
	}
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// restartAPIServer starts the killed API server again and returns when it
// was ready (/readyz) and when it authorized the controller again: its RBAC
// authorizer fills its cache from etcd after /readyz, and until then it
// refuses the ServiceAccount (403). The outage, as the controller lives it,
// ends at the latter.
func (cl *cluster) restartAPIServer() (ready, serving time.Time) {
	cl.t.Helper()
	require.NoError(cl.t, cl.env.StartAPIServer(cl.ctx))
	ready = time.Now()
	sa := cl.env.ImpersonatedConfig(saNamespace, saName)
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: saNamespace, Name: saName},
		{Verb: "delete", Resource: "pods", Namespace: cl.ns},
		{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: cl.ns},
	} {
		require.NoError(cl.t, testenv.WaitForAccess(cl.ctx, sa, attrs))
	}
	return ready, time.Now()
}

// leaseHolder is the Lease's holder as the test's own watch saw it.
type leaseHolder struct {
	identity string
	at       time.Time // when the watch delivered it
}

// waitHolder watches the controller's Lease (listing it again if the watch
// breaks, as across an API server restart) until cond holds for its
// holder, and returns it.
func (cl *cluster) waitHolder(cond func(holder string) bool) leaseHolder {
	cl.t.Helper()
	sel := fields.OneTermEqualSelector("metadata.name", saName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return cl.c.CoordinationV1().Leases(saNamespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return cl.c.CoordinationV1().Leases(saNamespace).Watch(ctx, o)
		},
	}
	var found leaseHolder
	match := func(obj any) bool {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return false
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); cond(h) {
			found = leaseHolder{identity: h, at: time.Now()}
			return true
		}
		return false
	}
	_, err := watchtools.UntilWithSync(cl.ctx, lw, &coordinationv1.Lease{},
		func(store cache.Store) (bool, error) { return slices.ContainsFunc(store.List(), match), nil },
		func(ev watch.Event) (bool, error) { return ev.Type != watch.Deleted && match(ev.Object), nil })
	require.NoError(cl.t, err, "waiting for the Lease's holder")
	return found
}

// waitGone waits until every pod is gone and returns when each was seen
// gone, by UID.
func (cl *cluster) waitGone(pods []*corev1.Pod, timeout time.Duration) map[types.UID]time.Time {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(cl.ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	gone := map[types.UID]time.Time{}
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at, err := testenv.WaitForPodDeleted(ctx, cl.c, p.Namespace, p.Name, p.UID)
			if assert.NoError(cl.t, err) {
				mu.Lock()
				gone[p.UID] = at
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return gone
}

// lateStats are deletion delays.
type lateStats struct{ late []time.Duration }

func (s lateStats) String() string {
	if len(s.late) == 0 {
		return "none"
	}
	l := slices.Clone(s.late)
	slices.Sort(l)
	return fmt.Sprintf("min %s, median %s, max %s", ms(l[0]), ms(l[len(l)/2]), ms(l[len(l)-1]))
}

// lateness splits the controller's evictions into those the oracle held to
// the fault's bound (due during it, or less than 2 s before it began),
// measured from the fault's end (negative: removed before it ended), and
// the others, measured from their deadline (or from when they were seen
// due, if later).
func lateness(rep *oracle.Report, fault oracle.FaultWindow) (during, after lateStats) {
	for _, e := range rep.Evictions {
		if e.Fault == fault.Name {
			during.late = append(during.late, e.Deleted.Sub(fault.End))
		} else {
			after.late = append(after.late, e.Late())
		}
	}
	return during, after
}

// waitGoneBy waits until every pod is gone or until, and returns the pods
// still there then.
func (cl *cluster) waitGoneBy(pods []*corev1.Pod, until time.Time) []*corev1.Pod {
	ctx, cancel := context.WithDeadline(cl.ctx, until)
	defer cancel()
	var mu sync.Mutex
	var left []*corev1.Pod
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := testenv.WaitForPodDeleted(ctx, cl.c, p.Namespace, p.Name, p.UID); err != nil {
				mu.Lock()
				left = append(left, p)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return left
}

// waitEvent waits for an event about the pod uid whose message starts with
// prefix, and returns it.
func (cl *cluster) waitEvent(ctx context.Context, uid types.UID, prefix string) (*corev1.Event, error) {
	return testenv.WaitForEventMessage(ctx, cl.c, cl.ns, uid, prefix)
}
