package metricsauth_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/examples/controller/metricsauth"
)

// countingSink is a logr sink that counts error lines and the info lines
// each verbosity would show.
type countingSink struct {
	mu     sync.Mutex
	errors []string
	infos  map[int]int
}

func (s *countingSink) Init(logr.RuntimeInfo)          {}
func (s *countingSink) Enabled(int) bool               { return true }
func (s *countingSink) WithValues(...any) logr.LogSink { return s }
func (s *countingSink) WithName(string) logr.LogSink   { return s }

func (s *countingSink) Info(level int, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.infos == nil {
		s.infos = map[int]int{}
	}
	s.infos[level]++
}

func (s *countingSink) Error(err error, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors = append(s.errors, fmt.Sprintf("%s: %v", msg, err))
}

func (s *countingSink) counts() (errors int, infoAtLevel0 int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errors), s.infos[0]
}

// serve returns the URL of a server answering "ok" behind the filter made
// with cfg, and the sink of its logger.
func serve(t *testing.T, cfg *rest.Config) (string, *countingSink) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	filter, err := metricsauth.New(cfg, httpClient)
	require.NoError(t, err)
	sink := &countingSink{}
	h, err := filter(logr.New(sink), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, sink
}

func get(t *testing.T, url, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

var runs atomic.Int64

// Each answer for what it is: no token or a token the API server rejects
// 401, a user without the permission 403, with it 200. None of them is an
// error in the log.
func TestAnswers(t *testing.T) {
	e := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := e.ApplyManifests(ctx, "../deploy/readers.yaml")
	require.NoError(t, err)
	ns := fmt.Sprintf("metricsauth-%d", runs.Add(1)) // go test -count: ServiceAccounts of its own
	reader, err := e.ServiceAccountToken(ctx, ns, "reader", "taintkit-noexecute-metrics-reader")
	require.NoError(t, err)
	nobody, err := e.ServiceAccountToken(ctx, ns, "nobody")
	require.NoError(t, err)
	url, sink := serve(t, e.AdminConfig())

	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"an empty bearer token", "Bearer ", http.StatusUnauthorized},
		{"another scheme", "Basic dXNlcjpwYXNz", http.StatusUnauthorized},
		{"a token the API server does not know", "Bearer not-a-token", http.StatusUnauthorized},
		{"the same again (cached)", "Bearer not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without the permission", "Bearer " + nobody, http.StatusForbidden},
		{"the metrics reader", "Bearer " + reader, http.StatusOK},
	} {
		code, body := get(t, url+"/metrics", tc.authorization)
		assert.Equal(t, tc.want, code, "%s: %s", tc.name, body)
		if code == http.StatusOK {
			assert.Equal(t, "ok", body)
		}
	}
	errs, infos := sink.counts()
	assert.Zero(t, errs, "error log lines: %v", sink.errors)
	assert.Zero(t, infos, "info lines at verbosity 0")
}

// With the API server unreachable no review can be made: every request is
// answered 500, and the log has one error line for all of them.
func TestUnreachableAPIServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now: connections are refused
	url, sink := serve(t, &rest.Config{Host: "https://" + addr, BearerToken: "admin", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})

	const requests = 20
	start := time.Now()
	for i := range requests {
		code, body := get(t, url+"/metrics", fmt.Sprintf("Bearer token-%d", i))
		assert.Equal(t, http.StatusInternalServerError, code, "request %d: %s", i, body)
	}
	errs, _ := sink.counts()
	most := 1 + int(time.Since(start)/metricsauth.ErrorLogInterval) // one per interval begun
	assert.True(t, errs >= 1 && errs <= most, "%d error log lines for %d failed reviews in %v (at most %d): %v",
		errs, requests, time.Since(start), most, sink.errors)
}
