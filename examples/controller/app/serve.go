package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/taintkit/taintkit/examples/controller/metricsauth"
)

// servers are the /metrics server and the /healthz and /readyz server.
type servers struct {
	metrics, health   *http.Server
	metricsL, healthL net.Listener
	watchCert         func(context.Context, logr.Logger) // nil: nothing to watch
	stopWatch         func()                             // set by serve if watching
	ready             atomic.Bool                        // caches synced
}

// MetricsFilter wraps the metrics server's handler: with
// [Options.MetricsSecure], every request to /metrics and /debug/evictions
// goes through it. [Run] uses [metricsauth.New]'s, which authenticates the
// request's bearer token with a TokenReview and authorizes its verb on its
// path (a non-resource URL) with a SubjectAccessReview.
type MetricsFilter = metricsauth.Filter

// listen binds both servers' addresses ("0" disables a server), so that a
// bad or busy address fails Run before anything starts. The metrics server
// also serves evictions on /debug/evictions; with o.MetricsSecure it serves
// HTTPS, every request through filter.
func listen(o Options, log logr.Logger, reg *prometheus.Registry, watchdog *leaderelection.HealthzAdaptor, evictions http.Handler, filter MetricsFilter) (*servers, error) {
	s := &servers{}
	var err error
	if o.MetricsBindAddress != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.Handle(DebugEvictionsPath, evictions)
		var handler http.Handler = mux
		if o.MetricsSecure {
			if filter == nil {
				return nil, errors.New("app: --metrics-secure needs an authenticating filter")
			}
			if handler, err = filter(log.WithName("metrics-auth"), mux); err != nil {
				return nil, fmt.Errorf("app: metrics server: %w", err)
			}
		}
		s.metrics = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		if s.metricsL, err = net.Listen("tcp", o.MetricsBindAddress); err != nil {
			return nil, fmt.Errorf("app: metrics server: %w", err)
		}
	}
	if o.HealthProbeBindAddress != "0" {
		if s.healthL, err = net.Listen("tcp", o.HealthProbeBindAddress); err != nil {
			if s.metricsL != nil {
				s.metricsL.Close()
			}
			return nil, fmt.Errorf("app: health probe server: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			// The watchdog fails once this replica leads but has not
			// renewed its lease for well past the lease duration: the
			// elector is stuck, and a restart is the way out.
			if watchdog != nil {
				if err := watchdog.Check(r); err != nil {
					http.Error(w, watchdog.Name()+": "+err.Error(), http.StatusInternalServerError)
					return
				}
			}
			fmt.Fprintln(w, "ok")
		})
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !s.ready.Load() {
				http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		s.health = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}
	if s.metrics != nil && o.MetricsSecure {
		// Last: a failure here closes both listeners. The certificate
		// files are polled from serve on, until shutdown.
		if s.metrics.TLSConfig, s.watchCert, err = servingTLS(o); err != nil {
			for _, l := range []net.Listener{s.metricsL, s.healthL} {
				if l != nil {
					l.Close()
				}
			}
			return nil, err
		}
		s.metricsL = tls.NewListener(s.metricsL, s.metrics.TLSConfig)
	}
	return s, nil
}

// addrs returns the bound addresses, nil for a disabled server.
func (s *servers) addrs() (metrics, health net.Addr) {
	if s.metricsL != nil {
		metrics = s.metricsL.Addr()
	}
	if s.healthL != nil {
		health = s.healthL.Addr()
	}
	return metrics, health
}

// serve starts serving in the background until shutdown, and watching the
// metrics server's certificate files, if any.
func (s *servers) serve(log logr.Logger) {
	if s.watchCert != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.watchCert(ctx, log)
		}()
		s.stopWatch = func() { cancel(); <-done }
	}
	for _, p := range []struct {
		srv  *http.Server
		l    net.Listener
		name string
	}{{s.metrics, s.metricsL, "metrics"}, {s.health, s.healthL, "health probe"}} {
		if p.srv == nil {
			continue
		}
		log.Info("Serving", "server", p.name, "address", p.l.Addr().String(), "https", p.srv.TLSConfig != nil)
		go func() {
			if err := p.srv.Serve(p.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(err, "Server failed", "server", p.name)
			}
		}()
	}
}

// shutdown stops both servers, letting requests in flight finish for a
// few seconds.
func (s *servers) shutdown(log logr.Logger) {
	if s.stopWatch != nil {
		defer s.stopWatch()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range []*http.Server{s.metrics, s.health} {
		if srv == nil {
			continue
		}
		if err := srv.Shutdown(ctx); err != nil {
			log.Error(err, "Shutting down a server")
			srv.Close()
		}
	}
}
