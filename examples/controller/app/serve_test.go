package app_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body, _ := getAs(t, url, "")
	return code, body
}

// getAs GETs url with token as its bearer token (none if empty); an https
// URL's certificate is not verified, as a Prometheus scraping a
// self-signed endpoint is configured. It returns the TLS state, nil for
// http.
func getAs(t *testing.T, url, token string) (int, string, *tls.ConnectionState) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.TLS
}

// insecureClient does not verify certificates: the servers' are
// self-signed.
var insecureClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// tokenFilter stands in for metricsauth's authenticating filter,
// which needs a real API server (integration/serving_test.go runs it
// there): a request with the token allowed for its path passes, one
// without a token gets 401, one with another token 403. It records the
// paths it was asked about.
type tokenFilter struct {
	allowed map[string]string // path → token
	mu      sync.Mutex
	asked   []string
}

func (f *tokenFilter) filter(_ logr.Logger, h http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.asked = append(f.asked, r.URL.Path)
		f.mu.Unlock()
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case !ok || token == "":
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case f.allowed[r.URL.Path] != token:
			http.Error(w, "Forbidden", http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	}), nil
}

func (f *tokenFilter) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// metricsToken and evictionsToken are what tokenFilter allows.
const metricsToken, evictionsToken = "prometheus", "operator"

func newTokenFilter() *tokenFilter {
	return &tokenFilter{allowed: map[string]string{"/metrics": metricsToken, app.DebugEvictionsPath: evictionsToken}}
}

// The servers, on real sockets and the real clock: nothing here waits for
// time, only for events (the pod's deletion, Run's return).
func TestRunServesMetricsAndProbes(t *testing.T) {
	client := newFakeAPI(taintedNode("node-1", time.Now()), boundPod("web", "uid-web", "node-1", time.Now(), nil))
	// Hold the first pod list until the test has seen /readyz fail.
	listed := make(chan struct{})
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-listed
		return false, nil, nil
	})
	deleted, err := client.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer deleted.Stop()

	o := testOptions()
	o.Registry = nil // Run's own registry, with the Go runtime's metrics
	o.LeaderElect = true
	o.Identity = "replica-a"
	o.MetricsBindAddress, o.HealthProbeBindAddress = "127.0.0.1:0", "127.0.0.1:0"
	addrs := make(chan [2]net.Addr, 1)
	o.Listening = func(metrics, health net.Addr) { addrs <- [2]net.Addr{metrics, health} }
	f := newTokenFilter()
	r := startFiltered(t, client, f.filter, o)
	a := <-addrs
	metricsURL, healthURL := "https://"+a[0].String(), "http://"+a[1].String()

	// The probes are plain HTTP, open to the kubelet; the metrics server
	// speaks only HTTPS.
	code, body := get(t, "http://"+a[0].String()+"/metrics")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "HTTP request to an HTTPS server")
	code, body = get(t, healthURL+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "ready before the caches synced: %s", body)
	code, _ = get(t, healthURL+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	close(listed)
	for ev := range deleted.ResultChan() {
		if ev.Type == watch.Deleted && ev.Object.(*v1.Pod).Name == "web" {
			break
		}
	}
	// The manager ran, so the caches had synced.
	code, _ = get(t, healthURL+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, healthURL+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, metricsURL+"/metrics")
	assert.Equal(t, http.StatusUnauthorized, code, "/metrics without a token")
	code, body, state := getAs(t, metricsURL+"/metrics", metricsToken)
	require.Equal(t, http.StatusOK, code)
	// Self-signed by default, for localhost.
	require.NotNil(t, state)
	leaf := state.PeerCertificates[0]
	assert.Contains(t, leaf.DNSNames, "localhost")
	assert.Equal(t, []string{"/metrics", "/metrics"}, f.paths(), "the probes went through the filter")
	for _, want := range []string{
		kube.MetricEvictionsPending + " ",
		// (The counters may not count the deletion yet: the manager counts
		// once the DELETE returned, the watch may tell the test first.)
		kube.MetricEvictions + `{outcome="deleted"} `,
		kube.MetricEvictions + `{outcome="evicted"} 0`,
		kube.MetricEvictionDelay + "_count ",
		kube.MetricEvictionBudgetWait + "_count 0",
		kube.MetricLeader + " 1",
		"go_goroutines ",
	} {
		assert.Contains(t, body, want)
	}

	require.NoError(t, r.stop())
	_, err = http.Get(healthURL + "/healthz")
	assert.Error(t, err, "the health server still serves after Run returned")
	_, err = insecureClient.Get(metricsURL + "/metrics")
	assert.Error(t, err, "the metrics server still serves after Run returned")
}

func TestRunListeningDisabledServers(t *testing.T) {
	o := testOptions() // both servers "0"
	got := make(chan [2]net.Addr, 1)
	o.Listening = func(metrics, health net.Addr) { got <- [2]net.Addr{metrics, health} }
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // stops before the caches sync
	client := newFakeAPI()
	require.NoError(t, app.RunWithClients(ctx, client, client, o))
	assert.Equal(t, [2]net.Addr{nil, nil}, <-got)
}

type pendingList []manager.PendingEviction

func (p pendingList) Pending() []manager.PendingEviction { return p }

// /debug/evictions: a JSON array of objects with exactly these fields.
func TestEvictionsHandler(t *testing.T) {
	h := &app.EvictionsHandler{}
	serve := func(method string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, app.DebugEvictionsPath, nil))
		return rec
	}
	// No manager runs: an empty array, not null.
	rec := serve(http.MethodGet)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `[]`, rec.Body.String())

	deadline := time.Date(2026, 11, 24, 10, 0, 5, 0, time.FixedZone("CET", 3600))
	h.SetSource(pendingList{
		{
			Namespace: "shop", Name: "web-0", UID: "uid-1", Node: "node-1",
			Taint:    v1.Taint{Key: "example.com/broken", Value: "true", Effect: v1.TaintEffectNoExecute},
			Deadline: deadline, Attempts: 3, LastError: "refused by a disruption budget",
		},
		{
			Namespace: "shop", Name: "web-1", UID: "uid-2", Node: "node-1",
			Taint:    v1.Taint{Key: "node.kubernetes.io/unreachable", Effect: v1.TaintEffectNoExecute},
			Deadline: deadline.Add(1500 * time.Millisecond),
		},
		// The pod and its taint are gone; the eviction will decide again.
		{Namespace: "shop", Name: "web-2", Deadline: deadline.Add(time.Minute)},
		// Given up: its attempts ran out.
		{
			Namespace: "shop", Name: "web-3", UID: "uid-4", Node: "node-2",
			Deadline: deadline.Add(2 * time.Minute), Attempts: 5, LastError: "the server is currently unable to handle the request", Failed: true,
		},
	})
	rec = serve(http.MethodGet)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `[
		{"namespace": "shop", "name": "web-0", "uid": "uid-1", "node": "node-1",
		 "taint": "example.com/broken=true:NoExecute", "deadline": "2026-11-24T09:00:05Z",
		 "attempts": 3, "lastError": "refused by a disruption budget", "failed": false},
		{"namespace": "shop", "name": "web-1", "uid": "uid-2", "node": "node-1",
		 "taint": "node.kubernetes.io/unreachable:NoExecute", "deadline": "2026-11-24T09:00:06.5Z",
		 "attempts": 0, "lastError": "", "failed": false},
		{"namespace": "shop", "name": "web-2", "uid": "", "node": "",
		 "taint": "", "deadline": "2026-11-24T09:01:05Z",
		 "attempts": 0, "lastError": "", "failed": false},
		{"namespace": "shop", "name": "web-3", "uid": "uid-4", "node": "node-2",
		 "taint": "", "deadline": "2026-11-24T09:02:05Z",
		 "attempts": 5, "lastError": "the server is currently unable to handle the request", "failed": true}
	]`, rec.Body.String())
	// The deadline is RFC 3339.
	var got []map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	for _, e := range got {
		_, err := time.Parse(time.RFC3339, e["deadline"].(string))
		assert.NoError(t, err)
	}

	h.SetSource(nil)
	assert.JSONEq(t, `[]`, serve(http.MethodGet).Body.String())
	rec = serve(http.MethodPost)
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
}

// Run serves the running manager's scheduled evictions on the metrics
// server: here a pod whose eviction a disruption budget refuses (on the
// fake API server) waits, with its attempts and last error.
func TestRunServesDebugEvictions(t *testing.T) {
	taintedAt := time.Now().Truncate(time.Second)
	client := newFakeAPI(taintedNode("node-1", taintedAt), boundPod("web", "uid-web", "node-1", taintedAt, nil))
	kubetest.RefuseEvictions(client, func(string, string) bool { return true })
	events, err := client.CoreV1().Events("default").Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer events.Stop()

	o := testOptions()
	o.UseEvictionAPI = true
	o.MetricsBindAddress = "127.0.0.1:0"
	addrs := make(chan net.Addr, 1)
	o.Listening = func(metrics, _ net.Addr) { addrs <- metrics }
	r := startFiltered(t, client, newTokenFilter().filter, o)
	url := "https://" + (<-addrs).String() + app.DebugEvictionsPath

	// The refusal's event is recorded after the refusal is noted: once it
	// is there, so is the attempt.
	for ev := range events.ResultChan() {
		if e, ok := ev.Object.(*v1.Event); ok && strings.Contains(e.Message, "refused by a disruption budget; retrying") {
			break
		}
	}
	// Its own permission: the metrics' token is refused.
	code, _, _ := getAs(t, url, metricsToken)
	assert.Equal(t, http.StatusForbidden, code)
	code, body, _ := getAs(t, url, evictionsToken)
	require.Equal(t, http.StatusOK, code, body)
	var list []app.PendingEvictionJSON
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.Len(t, list, 1, body)
	e := list[0]
	assert.Equal(t, "default", e.Namespace)
	assert.Equal(t, "web", e.Name)
	assert.Equal(t, types.UID("uid-web"), e.UID)
	assert.Equal(t, "node-1", e.Node)
	assert.Equal(t, unreachable+":NoExecute", e.Taint)
	deadline, err := time.Parse(time.RFC3339, e.Deadline)
	require.NoError(t, err)
	assert.False(t, deadline.Before(taintedAt), "deadline %s before the taint %s", deadline, taintedAt)
	assert.False(t, deadline.After(time.Now()), "deadline %s in the future", deadline)
	assert.GreaterOrEqual(t, e.Attempts, 1)
	// The server's message, not the queue's "timedqueue: retry at …" around it.
	assert.Equal(t, kubetest.BudgetRefusal("web-pdb").Error(), e.LastError)
	assert.True(t, podExists(t, client, "web"), "a refused eviction leaves the pod")

	require.NoError(t, r.stop())
	_, err = insecureClient.Get(url)
	assert.Error(t, err, "the metrics server still serves after Run returned")
}

// With --metrics-cert-dir the metrics server serves the certificate in the
// files, not a self-signed one.
func TestRunServesMetricsWithCertificateFromFiles(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("metrics.example", nil, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "serving.crt"), certPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "serving.key"), keyPEM, 0o600))
	want, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)

	o := testOptions()
	o.MetricsBindAddress = "127.0.0.1:0"
	o.MetricsCertDir, o.MetricsCertName, o.MetricsCertKey = dir, "serving.crt", "serving.key"
	addrs := make(chan net.Addr, 1)
	o.Listening = func(metrics, _ net.Addr) { addrs <- metrics }
	r := startFiltered(t, newFakeAPI(), newTokenFilter().filter, o)
	code, _, state := getAs(t, "https://"+(<-addrs).String()+"/metrics", metricsToken)
	assert.Equal(t, http.StatusOK, code)
	require.NotNil(t, state)
	assert.Equal(t, want.Certificate[0], state.PeerCertificates[0].Raw, "not the certificate of the files")
	require.NoError(t, r.stop())
}

// Certificate files that cannot be read, or a secure server without its
// authenticating filter, fail Run before anything starts.
func TestRunMetricsServingProblemsFailBeforeStarting(t *testing.T) {
	o := testOptions()
	o.MetricsBindAddress = "127.0.0.1:0"
	o.MetricsCertDir = t.TempDir() // empty
	client := newFakeAPI()
	err := app.RunWithMetricsFilter(t.Context(), client, newTokenFilter().filter, o)
	assert.ErrorContains(t, err, "--metrics-cert-dir")
	assert.ErrorContains(t, err, "tls.crt")

	o.MetricsCertDir = ""
	o.Registry = prometheus.NewRegistry()
	err = app.RunWithMetricsFilter(t.Context(), client, nil, o)
	assert.ErrorContains(t, err, "--metrics-secure needs an authenticating filter")
	assert.Empty(t, client.Actions(), "nothing started")
}

// --metrics-secure=false, the escape hatch for a local run: plain HTTP, no
// token asked, no filter needed.
func TestRunServesMetricsInsecurely(t *testing.T) {
	o := testOptions()
	o.MetricsSecure = false
	o.MetricsBindAddress = "127.0.0.1:0"
	addrs := make(chan net.Addr, 1)
	o.Listening = func(metrics, _ net.Addr) { addrs <- metrics }
	r := start(t, newFakeAPI(), o)
	base := "http://" + (<-addrs).String()
	for _, path := range []string{"/metrics", app.DebugEvictionsPath} {
		code, body, state := getAs(t, base+path, "")
		assert.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		assert.Nil(t, state, "%s served over TLS", path)
	}
	require.NoError(t, r.stop())
}
