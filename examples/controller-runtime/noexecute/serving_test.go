package noexecute_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/taintkit/taintkit/examples/controller-runtime/noexecute"
)

// The metrics (in controller-runtime's metrics.Registry) and
// /debug/evictions are served by the manager's secure metrics server behind
// delegated authentication and authorization: no token or an unknown one
// is 401, a
// ServiceAccount without the non-resource URL rule is 403, one with it
// reads taintkit_* metrics and the scheduled evictions.
func TestMetricsAndEvictionsBehindAuthn(t *testing.T) {
	h := setup(t, "cr-metrics")
	// A registry of this test's own stands in for the process-wide one that
	// the metrics server serves, so that the test can run more than once
	// in a process (go test -count).
	saved := crmetrics.Registry
	crmetrics.Registry = prometheus.NewRegistry()
	t.Cleanup(func() { crmetrics.Registry = saved })
	addr := freeAddr(t)
	h.startReplica(replicaOptions{registry: crmetrics.Registry, metrics: addr})

	const key = "example.com/maintenance"
	node := h.createNode("node")
	gone := h.createBoundPod("gone", node)
	waiting := h.createBoundPod("waiting", node, tolerate(key, 300*time.Second))
	tainted := h.setTaints(node, noExecuteTaint(key))
	h.waitGone(gone, 15*time.Second)
	h.waitEvent(waiting, "Scheduled for deletion", 10*time.Second)

	reader := h.serviceAccountToken("metrics-reader", "/metrics", noexecute.DebugEvictionsPath)
	nobody := h.serviceAccountToken("nobody")
	base := "https://" + addr
	status, _ := h.get(base+"/metrics", "")
	assert.Equal(t, http.StatusUnauthorized, status, "without a token")
	status, _ = h.get(base+"/metrics", "not-a-token")
	assert.Equal(t, http.StatusUnauthorized, status, "with a token the API server does not know")
	status, _ = h.get(base+"/metrics", nobody)
	assert.Equal(t, http.StatusForbidden, status, "without the RBAC rule")
	status, body := h.get(base+"/metrics", reader)
	require.Equal(t, http.StatusOK, status, body)
	for _, line := range []string{
		`taintkit_evictions_total{outcome="deleted"} 1`,
		`taintkit_evictions_pending 1`,
		`taintkit_leader 1`,
		`taintkit_timedqueue_adds_total{queue="noexecute-evictions"} 2`,
	} {
		assert.Contains(t, body, line+"\n")
	}

	status, _ = h.get(base+noexecute.DebugEvictionsPath, nobody)
	assert.Equal(t, http.StatusForbidden, status)
	status, body = h.get(base+noexecute.DebugEvictionsPath, reader)
	require.Equal(t, http.StatusOK, status, body)
	var list []noexecute.PendingEvictionJSON
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.Len(t, list, 1)
	assert.Equal(t, "waiting", list[0].Name)
	assert.Equal(t, waiting.UID, list[0].UID)
	assert.Equal(t, key+"=true:NoExecute", list[0].Taint)
	want := countdownStart(t, tainted, key, waiting).Add(300 * time.Second).UTC().Format(time.RFC3339Nano)
	assert.Equal(t, want, list[0].Deadline)
}

// serviceAccountToken creates a ServiceAccount allowed to GET the given
// non-resource URLs (none: nothing) and returns a token for it.
func (h *harness) serviceAccountToken(name string, urls ...string) string {
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	require.NoError(h.t, h.c.Create(h.ctx, sa))
	if len(urls) > 0 {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: h.ns + "-" + name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: urls, Verbs: []string{"get"}}}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: h.ns + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: h.ns, Name: name}}}
		for _, obj := range []client.Object{role, binding} {
			require.NoError(h.t, h.c.Create(h.ctx, obj))
			h.t.Cleanup(func() { _ = h.c.Delete(h.ctx, obj) })
		}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
	require.NoError(h.t, h.c.SubResource("token").Create(h.ctx, sa, req))
	require.NotEmpty(h.t, req.Status.Token)
	return req.Status.Token
}

// get GETs url with a bearer token ("": none) from the metrics server,
// whose certificate is self-signed; startReplica has waited for it to listen.
func (h *harness) get(url, token string) (int, string) {
	h.t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed, as controller-runtime serves by default
	}}
	req, err := http.NewRequestWithContext(h.ctx, http.MethodGet, url, nil)
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	require.NoError(h.t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(h.t, err)
	return resp.StatusCode, strings.TrimSpace(string(body))
}
