package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

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
	w, err := certwatcher.New(filepath.Join(o.MetricsCertDir, o.MetricsCertName), filepath.Join(o.MetricsCertDir, o.MetricsCertKey))
	if err != nil {
		return nil, nil, fmt.Errorf("app: --metrics-cert-dir: %w", err)
	}
	cfg.GetCertificate = w.GetCertificate
	watch = func(ctx context.Context, log logr.Logger) {
		if err := w.Start(ctx); err != nil {
			log.Error(err, "Watching the metrics server's certificate")
		}
	}
	return cfg, watch, nil
}
