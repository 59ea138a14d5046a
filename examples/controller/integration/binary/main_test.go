// Package binary_test runs the controller's binary, as a deployment runs it,
// against a real kube-apiserver and etcd (internal/testenv): the process
// reads a kubeconfig that acts as the ServiceAccount of deploy/, so the
// manifests' RBAC is what it is allowed. The tests cover what only a real
// process shows: leader election between replicas when one is killed, the
// request rate of the flags under a thousand evictions, the HTTP endpoints,
// signals and exit codes.
//
// The tests run on the real clock: each states its tolerances, and waits on
// watches (or, for a process's HTTP endpoint, on a bounded retry).
package binary_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// The controller's ServiceAccount and Lease, as deploy/ names them.
const (
	saNamespace    = "kube-system"
	saName         = "taintkit-noexecute"
	leaseNamespace = "kube-system"
	leaseName      = "taintkit-noexecute"
)

// controllerBin is the controller built with -race by TestMain, so that the
// processes the tests start are checked for data races too.
var controllerBin string

func TestMain(m *testing.M) {
	begin := time.Now()
	bin, err := testenv.BuildController(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	controllerBin = bin
	fmt.Fprintf(os.Stderr, "binary_test: built the controller with -race in %v\n", time.Since(begin).Round(time.Millisecond))
	testenv.Main(m, testenv.Options{})
}

// env is one test's share of the API server.
type env struct {
	*testenv.Env
	c          kubernetes.Interface
	ctx        context.Context
	kubeconfig string // acts as the controller's ServiceAccount
	oracle     *oracle.Oracle
	// scrapeToken is a token allowed /metrics and /debug/evictions, as
	// Prometheus and an operator would have (deploy/readers.yaml).
	scrapeToken string

	verifyOnce sync.Once
	report     *oracle.Report
}

// verify has the oracle check the controllers' writes, once (the test's
// end does it if the test has not), and returns its report. A test that
// reads the report stops its controllers first.
func (e *env) verify(t *testing.T) *oracle.Report {
	e.verifyOnce.Do(func() { e.report = e.oracle.Verify(t) })
	return e.report
}

// setup applies the RBAC of deploy/ (not its Deployment), waits until the
// ServiceAccount may use it, writes a kubeconfig that impersonates it,
// creates namespace and starts a kubelet stand-in there that deletes with
// finaliser (the administrator's client if nil), and an oracle that checks
// every write of the controller to namespace's pods, from the API server's
// audit log and its own watch, once the test's controllers have stopped.
// ctx ends after timeout. Cleanup deletes the pods left in namespace.
func setup(t *testing.T, namespace string, timeout time.Duration, finaliser kubernetes.Interface) *env {
	t.Helper()
	e := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	c := e.Client()

	_, err := e.ApplyManifests(ctx, "../../deploy/serviceaccount.yaml", "../../deploy/rbac.yaml", "../../deploy/readers.yaml")
	require.NoError(t, err)
	sa := e.ImpersonatedConfig(saNamespace, saName)
	// The last rules of the manifests; RBAC reaches the authorizer through
	// a watch, a moment after the apply.
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "watch", Resource: "pods"},
		{Verb: "patch", Resource: "pods", Subresource: "status"},
		{Namespace: leaseNamespace, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: leaseName},
		{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
		{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	} {
		require.NoError(t, testenv.WaitForAccess(ctx, sa, attrs))
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, testenv.WriteKubeconfig(kubeconfig, sa))

	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	if finaliser == nil {
		finaliser = c
	}
	f, err := testenv.StartPodFinaliser(ctx, finaliser, namespace)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.Stop(), "the kubelet stand-in failed a deletion") })
	// The API server outlives the test, and so would the pods left in its
	// namespace: the next test's controller would count them in its queue.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, c.CoreV1().Pods(namespace).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}))
	})
	token, err := e.ServiceAccountToken(ctx, namespace, "scraper", "taintkit-noexecute-metrics-reader", "taintkit-noexecute-evictions-reader")
	require.NoError(t, err)
	o, err := oracle.Start(ctx, oracle.Options{Client: c, AuditLog: e.AuditLogPath(), Namespace: namespace})
	require.NoError(t, err)
	te := &env{Env: e, c: c, ctx: ctx, kubeconfig: kubeconfig, oracle: o, scrapeToken: token}
	// Registered last, run first of these: after the controllers stopped
	// (their cleanups were registered later), before the pods are deleted.
	t.Cleanup(func() { te.verify(t) })
	return te
}

// leaderFlags are short leader election durations, so that a takeover
// takes seconds: Validate wants renew < lease and retry × 1.2 < renew.
var leaderFlags = []string{
	"--leader-elect=true",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
}
