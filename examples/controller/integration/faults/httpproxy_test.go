package faults_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// httpProxy is an HTTP-level proxy between a controller replica and the
// API server, built on net/http/httputil.ReverseProxy: it terminates TLS
// with the API server's own serving certificate (the test CA's), so the
// controller still verifies whom it talks to, and forwards each request
// with the administrator's client certificate and the request's own
// headers (its impersonation of the ServiceAccount, its User-Agent). It
// can fail pod writes and slow every request.
type httpProxy struct {
	srv *httptest.Server
	rp  *httputil.ReverseProxy
	up  http.RoundTripper
	url *url.URL

	mu       sync.Mutex
	rng      *rand.Rand
	failRate float64       // share of pod writes failed
	doomed   string        // a pod all of whose writes fail while failRate > 0
	dropOnce string        // a pod whose next DELETE is applied and its answer dropped
	latency  time.Duration // added before every request
	lost     []string      // audit IDs of applied writes whose answers were dropped
	injected map[string]int
}

// newHTTPProxy starts a proxy to the test's API server, failing with the
// given seed; it is stopped when the test ends.
func (cl *cluster) newHTTPProxy(seed uint64) *httpProxy {
	t := cl.t
	cert, err := cl.env.ServingCertificate()
	require.NoError(t, err)
	up, err := rest.TransportFor(cl.env.AdminConfig())
	require.NoError(t, err)
	target := &url.URL{Scheme: "https", Host: cl.env.Host()}
	p := &httpProxy{up: up, url: target, rng: rand.New(rand.NewPCG(seed, seed)), injected: map[string]int{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     up,
		FlushInterval: -1, // watches stream
	}
	p.srv = httptest.NewUnstartedServer(p)
	p.srv.EnableHTTP2 = true
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

// Addr is where the proxy listens, 127.0.0.1:port.
func (p *httpProxy) Addr() string { return strings.TrimPrefix(p.srv.URL, "https://") }

// set changes what the proxy does to the requests that start from now.
func (p *httpProxy) set(failRate float64, latency time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failRate, p.latency = failRate, latency
}

// doom makes every write to the pod named name fail (503) while writes
// fail at all.
func (p *httpProxy) doom(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.doomed = name
}

// dropNextDelete makes the pod named name's next DELETE be applied and its
// answer dropped, while writes fail at all.
func (p *httpProxy) dropNextDelete(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropOnce = name
}

// report returns the faults injected so far, by kind, and the audit IDs of
// the writes applied whose answers were dropped.
func (p *httpProxy) report() (map[string]int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	injected := make(map[string]int, len(p.injected))
	for k, v := range p.injected {
		injected[k] = v
	}
	return injected, append([]string(nil), p.lost...)
}

// podWrite reports whether r deletes a pod, evicts it or writes its status.
func podWrite(r *http.Request) bool {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 6 || parts[0] != "api" || parts[2] != "namespaces" || parts[4] != "pods" {
		return false
	}
	switch {
	case len(parts) == 6:
		return r.Method == http.MethodDelete
	case len(parts) == 7 && parts[6] == "eviction":
		return r.Method == http.MethodPost
	case len(parts) == 7 && parts[6] == "status":
		return r.Method == http.MethodPatch || r.Method == http.MethodPut
	}
	return false
}

func (p *httpProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	latency, fail, kind := p.latency, false, 0
	if podWrite(r) && p.failRate > 0 {
		fail, kind = p.rng.Float64() < p.failRate, p.rng.IntN(3)
		switch pod := strings.Split(strings.Trim(r.URL.Path, "/"), "/")[5]; {
		case pod == p.doomed:
			fail, kind = true, 1
		case pod == p.dropOnce && r.Method == http.MethodDelete:
			fail, kind, p.dropOnce = true, 2, ""
		}
	}
	p.mu.Unlock()
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	if !fail {
		p.rp.ServeHTTP(w, r)
		return
	}
	switch kind {
	case 0, 1:
		code, reason := http.StatusInternalServerError, "InternalError"
		if kind == 1 {
			code, reason = http.StatusServiceUnavailable, "ServiceUnavailable"
		}
		p.count(fmt.Sprint(code))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test's proxy","reason":%q,"code":%d}`, reason, code)
	default:
		// Applied, and the answer dropped: the server acts on the request,
		// then this stream alone is reset (the connection and the other
		// requests on it carry on).
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = p.url.Scheme, p.url.Host, "", ""
		resp, err := p.up.RoundTrip(out)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			p.mu.Lock()
			p.lost = append(p.lost, resp.Header.Get("Audit-Id"))
			p.injected["applied, answer dropped"]++
			p.mu.Unlock()
		}
		panic(http.ErrAbortHandler) // for HTTP/2: RST_STREAM on this stream only
	}
}

func (p *httpProxy) count(kind string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.injected[kind]++
}
