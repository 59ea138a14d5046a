package app

import (
	"context"
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
)

// servers are the /metrics server and the /healthz and /readyz server.
type servers struct {
	metrics, health   *http.Server
	metricsL, healthL net.Listener
	ready             atomic.Bool // caches synced
}

// listen binds both servers' addresses ("0" disables a server), so that a
// bad or busy address fails Run before anything starts. The metrics server
// also serves evictions on /debug/evictions.
func listen(o Options, reg *prometheus.Registry, watchdog *leaderelection.HealthzAdaptor, evictions http.Handler) (*servers, error) {
	s := &servers{}
	var err error
	if o.MetricsBindAddress != "0" {
		if s.metricsL, err = net.Listen("tcp", o.MetricsBindAddress); err != nil {
			return nil, fmt.Errorf("app: metrics server: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.Handle(DebugEvictionsPath, evictions)
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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

// serve starts serving in the background until shutdown.
func (s *servers) serve(log logr.Logger) {
	for _, p := range []struct {
		srv  *http.Server
		l    net.Listener
		name string
	}{{s.metrics, s.metricsL, "metrics"}, {s.health, s.healthL, "health probe"}} {
		if p.srv == nil {
			continue
		}
		log.Info("Serving", "server", p.name, "address", p.l.Addr().String())
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
