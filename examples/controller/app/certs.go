package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
)

// certPollInterval is how often the metrics server's certificate files are
// read for a change: a renewed certificate is served within it.
const certPollInterval = 10 * time.Second

// servingTLS returns the metrics server's TLS configuration: the
// certificate and key in o.MetricsCertDir, reloaded when they change on
// disk (as cert-manager or a mounted Secret renews them), or, without a
// directory, a self-signed certificate for localhost made now. watch keeps
// the files' certificate current until ctx is done; it is nil without
// files.
func servingTLS(o Options) (cfg *tls.Config, watch func(ctx context.Context, log logr.Logger), err error) {
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.MetricsCertDir == "" {
		// As kube-controller-manager does by default: what matters is
		// that the traffic is encrypted; clients authenticate with tokens.
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("app: self-signed certificate for the metrics server: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("app: self-signed certificate for the metrics server: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
		return cfg, nil, nil
	}
	r, err := newCertReloader(filepath.Join(o.MetricsCertDir, o.MetricsCertName), filepath.Join(o.MetricsCertDir, o.MetricsCertKey))
	if err != nil {
		return nil, nil, fmt.Errorf("app: --metrics-cert-dir: %w", err)
	}
	cfg.GetCertificate = r.getCertificate
	return cfg, r.watch, nil
}

// certReloader serves the certificate and key of two PEM files, read again
// every interval and reloaded when their content changed. A pair that
// cannot be loaded (a file missing, half written, or a key that does not
// match the certificate, as while a renewal replaces them one at a time)
// leaves the last good pair in service.
type certReloader struct {
	certFile, keyFile string
	interval          time.Duration

	pair atomic.Pointer[tls.Certificate]

	// Used by watch's goroutine alone.
	certPEM, keyPEM []byte // of the pair tried last, served or not
	lastErr         string // the last failure logged, so that it is logged once
}

// newCertReloader loads the pair, or fails.
func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, interval: certPollInterval}
	certPEM, keyPEM, err := r.read()
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading %s and %s: %w", certFile, keyFile, err)
	}
	r.pair.Store(&pair)
	r.certPEM, r.keyPEM = certPEM, keyPEM
	return r, nil
}

// getCertificate is the tls.Config's GetCertificate: the current pair.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.pair.Load(), nil
}

func (r *certReloader) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(r.certFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(r.keyFile); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// watch reloads the pair every r.interval until ctx is done.
func (r *certReloader) watch(ctx context.Context, log logr.Logger) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.reload(log)
		}
	}
}

// reload reads the files and, if their content changed since the pair
// tried last, serves the new pair. A failure is logged once: the same
// error again, or the same broken pair read again, is not.
func (r *certReloader) reload(log logr.Logger) {
	certPEM, keyPEM, err := r.read()
	if err != nil {
		r.failed(log, err)
		return
	}
	if bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM) {
		r.lastErr = ""
		return
	}
	r.certPEM, r.keyPEM = certPEM, keyPEM
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		r.failed(log, fmt.Errorf("loading %s and %s: %w", r.certFile, r.keyFile, err))
		return
	}
	r.pair.Store(&pair)
	r.lastErr = ""
	log.Info("Reloaded the metrics server's certificate", "certFile", r.certFile, "keyFile", r.keyFile)
}

func (r *certReloader) failed(log logr.Logger, err error) {
	if err.Error() == r.lastErr {
		return
	}
	r.lastErr = err.Error()
	log.Error(err, "Reloading the metrics server's certificate: still serving the previous one")
}
