package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configures [Start]. The zero Options is what the tests use.
type Options struct {
	// KubeAPIServer is the kube-apiserver binary. Empty means
	// $TAINTKIT_KUBE_APISERVER, else the file that [BuildCommand] writes.
	KubeAPIServer string
	// Etcd is the etcd binary. Empty means $TAINTKIT_ETCD, else etcd on
	// $PATH, else /usr/bin/etcd.
	Etcd string
	// APIServerFlags are added after the kube-apiserver's own flags; the last
	// value of a flag wins, so these override.
	APIServerFlags []string
	// EtcdFlags are added after etcd's own flags (for example a larger
	// --quota-backend-bytes); the last value of a flag wins.
	EtcdFlags []string
	// AuditReads also records reads of pods and nodes (get, list, watch) in
	// the audit log, at the Metadata level, so that every request a
	// controller makes can be counted from it.
	AuditReads bool
	// Dir holds the certificates, etcd's data and both servers' logs
	// (etcd.log, kube-apiserver.log). Empty means a new temporary directory,
	// removed by Stop. Start empties etcd's data either way.
	Dir string
}

// Env is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use by multiple goroutines. The zero value is not usable; call
// [Start].
type Env struct {
	dir       string
	removeDir bool
	etcd      *process
	admin     *rest.Config
	client    *kubernetes.Clientset
	host      string // 127.0.0.1:port of the API server

	// apiserverBin and apiserverArgs start the API server again after
	// KillAPIServer, on the same port with the same etcd.
	apiserverBin  string
	apiserverArgs []string

	mu        sync.Mutex // guards apiserver and witness
	apiserver *process
	witness   *process // see StartWitness

	stopOnce sync.Once
	stopErr  error
}

// startAttempts bounds retries when another process takes a chosen port
// before a server binds it.
const startAttempts = 3

// Start starts etcd and a kube-apiserver on 127.0.0.1 and returns once the API
// server's /readyz is 200 and the namespaces default and kube-system exist.
// ctx bounds the start-up only; the servers run until [Env.Stop].
//
// If a binary is missing, the error is a [*MissingBinaryError].
func Start(ctx context.Context, opts Options) (*Env, error) {
	etcdBin, err := findEtcd(opts.Etcd)
	if err != nil {
		return nil, err
	}
	apiserverBin, err := findKubeAPIServer(opts.KubeAPIServer)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		env, err := start(ctx, etcdBin, apiserverBin, opts)
		if err == nil || !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return env, err
		}
	}
}

func start(ctx context.Context, etcdBin, apiserverBin string, opts Options) (_ *Env, err error) {
	e := &Env{dir: opts.Dir}
	if e.dir == "" {
		if e.dir, err = os.MkdirTemp("", "taintkit-testenv-"); err != nil {
			return nil, err
		}
		e.removeDir = true
	} else if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()

	certDir := filepath.Join(e.dir, "pki")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	pki, err := writePKI(certDir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, securePort := ports[0], ports[1], ports[2]

	// etcd first: the API server fails its readiness until etcd answers, and
	// a failure is plainer to report from etcd's own probe.
	// A data dir left by an earlier start would hold that cluster's peer
	// URL, not this one's.
	etcdData := filepath.Join(e.dir, "etcd")
	if err := os.RemoveAll(etcdData); err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	e.etcd, err = startProcess("etcd", etcdBin, append([]string{
		"--data-dir=" + etcdData,
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync", // the data dies with the test; fsync only costs time
		"--logger=zap",      // etcd 3.4's default logger warns that it is deprecated
	}, opts.EtcdFlags...), filepath.Join(e.dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	if err := e.etcd.waitReady(ctx, etcdHealthy(etcdURL)); err != nil {
		return nil, err
	}

	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(securePort),
		// No kubernetes Service endpoints to keep: with the default
		// reconciler the server tries to publish 127.0.0.1 and fails.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + filepath.Join(certDir, servingCert),
		"--tls-private-key-file=" + filepath.Join(certDir, servingKey),
		"--client-ca-file=" + filepath.Join(certDir, caFile),
		"--authorization-mode=RBAC",
		// No controller-manager creates ServiceAccount tokens, so admission
		// would refuse every pod.
		"--disable-admission-plugins=ServiceAccount",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(certDir, saPublicKey),
		"--service-account-signing-key-file=" + filepath.Join(certDir, saSigningKey),
		"--service-cluster-ip-range=10.0.0.0/24",
	}
	audit, err := auditFlags(e.dir, e.AuditLogPath(), opts.AuditReads)
	if err != nil {
		return nil, err
	}
	args = append(args, audit...)
	e.apiserverBin = apiserverBin
	e.apiserverArgs = append(args, opts.APIServerFlags...)
	e.host = "127.0.0.1:" + strconv.Itoa(securePort)
	e.apiserver, err = startProcess("kube-apiserver", apiserverBin, e.apiserverArgs, e.apiserverLog())
	if err != nil {
		return nil, err
	}

	e.admin = &rest.Config{
		Host: "https://" + e.host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   pki.caCert,
			CertData: pki.admin.cert,
			KeyData:  pki.admin.key,
		},
		// Tests create objects by the thousand; a client-side limit would
		// only slow them. A caller wanting one sets QPS and Burst.
		QPS: -1,
	}
	if e.client, err = kubernetes.NewForConfig(e.admin); err != nil {
		return nil, err
	}
	if err := e.apiserver.waitReady(ctx, e.ready); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Env) apiserverLog() string { return filepath.Join(e.dir, "kube-apiserver.log") }

// etcdHealthy probes etcd's /health.
func etcdHealthy(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/health: %s: %s", resp.Status, body)
		}
		return nil
	}
}

// ready probes /readyz and then the namespaces the server creates as it
// starts, which tests use at once: kube-system holds leader election's Lease.
func (e *Env) ready(ctx context.Context) error {
	if err := e.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		return fmt.Errorf("/readyz: %w", err)
	}
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem} {
		if _, err := e.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s not created yet", ns)
			}
			return err
		}
	}
	return nil
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testenv: choosing a port: %w", err)
		}
		// Held open until all are chosen, so the n ports differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// AdminConfig returns a new config for the cluster administrator (group
// system:masters). It has no client-side rate limit (QPS -1).
func (e *Env) AdminConfig() *rest.Config {
	return rest.CopyConfig(e.admin)
}

// Client returns a clientset for the cluster administrator.
func (e *Env) Client() kubernetes.Interface {
	return e.client
}

// ImpersonatedConfig returns a new config that acts as the ServiceAccount
// namespace/name: user system:serviceaccount:<namespace>:<name> in the groups
// system:serviceaccounts, system:serviceaccounts:<namespace> and
// system:authenticated, as the API server authenticates a pod's token. RBAC
// allows it exactly what the ServiceAccount's bindings allow. It has no
// client-side rate limit (QPS -1).
func (e *Env) ImpersonatedConfig(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(e.admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{
			"system:serviceaccounts",
			"system:serviceaccounts:" + namespace,
			"system:authenticated",
		},
	}
	return cfg
}

// stopGrace is how long each server gets to exit after SIGTERM before it is
// killed.
const stopGrace = 10 * time.Second

// Stop stops the API server, then etcd, and removes the directory that Start
// created (a Dir given in Options stays). It returns an error if either
// server had exited by itself before. Calls after the first return the first
// call's result.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		e.mu.Lock()
		apiserver, witness := e.apiserver, e.witness
		e.mu.Unlock()
		for _, p := range []*process{witness, apiserver, e.etcd} {
			if p != nil {
				errs = append(errs, p.stop(stopGrace))
			}
		}
		if e.removeDir {
			errs = append(errs, os.RemoveAll(e.dir))
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// PIDs returns the process IDs of the API server and of etcd, for a caller
// that reads their CPU time and memory from /proc.
func (e *Env) PIDs() (apiserver, etcd int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.apiserver.cmd.Process.Pid, e.etcd.cmd.Process.Pid
}

// dumpLogs writes the last lines of each server's log to w.
func (e *Env) dumpLogs(w io.Writer, lines int) {
	e.mu.Lock()
	apiserver, witness := e.apiserver, e.witness
	e.mu.Unlock()
	for _, p := range []*process{e.etcd, apiserver, witness} {
		if p != nil {
			fmt.Fprintf(w, "--- last %d lines of %s:\n%s\n", lines, p.logPath, p.tail(lines))
		}
	}
}
