package integration_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/examples/internal/kube"
)

// The ClusterRoles of deploy/readers.yaml.
const (
	metricsReader   = "taintkit-noexecute-metrics-reader"
	evictionsReader = "taintkit-noexecute-evictions-reader"
)

// readersNamespace holds the ServiceAccounts of readerToken.
const readersNamespace = "readers"

var readerTokens struct {
	sync.Mutex
	byRole map[string]string
}

// readerToken returns a token of a ServiceAccount bound to role, a
// ClusterRole of deploy/readers.yaml ("" for a ServiceAccount bound to
// nothing), as Prometheus or an operator would have one, made once per test
// binary (testenv.Env.ServiceAccountToken).
func readerToken(t *testing.T, role string) string {
	t.Helper()
	readerTokens.Lock()
	defer readerTokens.Unlock()
	if tok, ok := readerTokens.byRole[role]; ok {
		return tok
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name := cmp.Or(strings.TrimPrefix(role, "taintkit-noexecute-"), "nobody")
	var roles []string
	if role != "" {
		roles = append(roles, role)
	}
	token, err := testenv.Shared(t).ServiceAccountToken(ctx, readersNamespace, name, roles...)
	require.NoError(t, err)
	if readerTokens.byRole == nil {
		readerTokens.byRole = map[string]string{}
	}
	readerTokens.byRole[role] = token
	return token
}

// insecureClient does not verify the metrics server's certificate, which
// is self-signed, as a Prometheus scrape configured with
// insecure_skip_verify does not.
var insecureClient = &http.Client{
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	Timeout:   10 * time.Second,
}

// get GETs path on the controller's metrics server with token as its
// bearer token (none if empty), and returns the status and body.
func (ctrl *controller) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	code, body, _ := ctrl.getTLS(t, path, token)
	return code, body
}

func (ctrl *controller) getTLS(t *testing.T, path, token string) (int, string, *tls.ConnectionState) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+ctrl.metricsAddr+path, nil)
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

// The metrics server, as deploy/ runs it: HTTPS, every request
// authenticated by the API server (a TokenReview the controller makes as
// its ServiceAccount) and authorized for its path (a SubjectAccessReview):
// no token or an unknown one 401, a token without the permission 403,
// with it 200. /metrics
// and /debug/evictions are separate permissions (deploy/readers.yaml); the
// probes stay plain HTTP, open to the kubelet. startController fails the
// test if the API server refuses the controller a review.
func TestMetricsServerAuthenticatesAndAuthorizes(t *testing.T) {
	h := setup(t, "serving")
	nobody, prometheus, operator := readerToken(t, ""), readerToken(t, metricsReader), readerToken(t, evictionsReader)
	ctrl := h.startController(false, nil)

	for _, tc := range []struct {
		who, token string
		path       string
		want       int
	}{
		{"no token", "", "/metrics", http.StatusUnauthorized},
		{"no token", "", app.DebugEvictionsPath, http.StatusUnauthorized},
		{"a ServiceAccount bound to nothing", nobody, "/metrics", http.StatusForbidden},
		{"a ServiceAccount bound to nothing", nobody, app.DebugEvictionsPath, http.StatusForbidden},
		{"the metrics reader", prometheus, "/metrics", http.StatusOK},
		{"the metrics reader", prometheus, app.DebugEvictionsPath, http.StatusForbidden},
		{"the evictions reader", operator, app.DebugEvictionsPath, http.StatusOK},
		{"the evictions reader", operator, "/metrics", http.StatusForbidden},
	} {
		code, body := ctrl.get(t, tc.path, tc.token)
		if assert.Equal(t, tc.want, code, "%s on %s: %s", tc.who, tc.path, body) && code == http.StatusOK {
			switch tc.path {
			case "/metrics":
				assert.Contains(t, body, kube.MetricEvictionsPending+" ")
			default:
				assert.Equal(t, "[]\n", body)
			}
		}
	}
	// A token the API server does not know is unauthorized, as no token is.
	code, body := ctrl.get(t, "/metrics", "not-a-token")
	assert.Equal(t, http.StatusUnauthorized, code, "an unknown token: %s", body)
	assert.NotContains(t, body, kube.MetricEvictionsPending)

	_, _, state := ctrl.getTLS(t, "/metrics", prometheus)
	require.NotNil(t, state, "/metrics not served over TLS")
	assert.Contains(t, state.PeerCertificates[0].DNSNames, "localhost", "not the self-signed certificate")

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := insecureClient.Get("http://" + ctrl.healthAddr + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s without a token", path)
	}
}
