package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/taintkit/taintkit/examples/controller/app"
)

// uaServer is just enough of an API server for Run to list, watch and
// create its Lease: it records each request's path and User-Agent.
type uaServer struct {
	mu     sync.Mutex
	agents map[string][]string // User-Agents by "METHOD path"
	leased chan struct{}       // closed at the first Lease create
	once   sync.Once
}

func (s *uaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	call := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.agents[call] = append(s.agents[call], r.UserAgent())
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Query().Get("watch") == "true":
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// A streaming list of nothing: the bookmark that ends it.
			kind := "Pod"
			if strings.HasSuffix(r.URL.Path, "/nodes") {
				kind = "Node"
			}
			_, _ = io.WriteString(w, `{"type":"BOOKMARK","object":{"kind":"`+kind+`","apiVersion":"v1","metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n")
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then a watch that sees nothing
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/nodes"):
		_, _ = io.WriteString(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods"):
		_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/leases"):
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
		s.once.Do(func() { close(s.leased) })
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

func (s *uaServer) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var calls []string
	for c := range s.agents {
		calls = append(calls, c)
	}
	return calls
}

// Every request of a replica carries its leader election identity in its
// User-Agent, so that the API server's audit log says which replica made it;
// the leader election's requests say so too.
func TestRunUserAgentCarriesIdentity(t *testing.T) {
	s := &uaServer{agents: map[string][]string{}, leased: make(chan struct{})}
	srv := httptest.NewServer(s)
	defer srv.Close()

	o := leaderOptions("replica-ua_x1")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, &rest.Config{Host: srv.URL, UserAgent: "caller/1.0"}, o) }()
	select {
	case <-s.leased:
	case err := <-done:
		t.Fatalf("Run returned before it created the Lease: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no Lease created in 30 s; requests: %v", s.calls())
	}
	cancel()
	require.NoError(t, <-done)

	want := app.UserAgent("replica-ua_x1")
	assert.Regexp(t, `^taintkit-noexecute/\S+ \(replica-ua_x1\)$`, want)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.agents["GET /api/v1/nodes"], "no node list: %v", s.agents)
	require.NotEmpty(t, s.agents["GET /api/v1/pods"], "no pod list: %v", s.agents)
	for call, agents := range s.agents {
		for _, ua := range agents {
			if strings.Contains(call, "/leases") {
				assert.Equal(t, want+" leader-election", ua, call)
			} else {
				assert.Equal(t, want, ua, call)
			}
		}
	}
}
