// Package testenv starts controller-runtime's envtest for this module's
// tests, the way kubebuilder projects run theirs, on binaries found without
// a download: the kube-apiserver that
// examples/controller/hack/build-kube-apiserver.sh builds from
// k8s.io/kubernetes, and Debian's etcd.
//
// Where the binaries come from, first match wins:
//
//   - kube-apiserver: $TAINTKIT_KUBE_APISERVER; else, if $KUBEBUILDER_ASSETS
//     is set, envtest's own lookup there; else the build script's output,
//     ${TAINTKIT_CACHE:-${XDG_CACHE_HOME:-~/.cache}/taintkit}/kube-apiserver-v1.37.2.
//   - etcd: $TAINTKIT_ETCD; else $KUBEBUILDER_ASSETS as above; else etcd on
//     $PATH, else /usr/bin/etcd (apt-get install etcd-server).
//
// When one is missing, tests that call [Config] are skipped with the way to
// get it, or fail when CI is true, so that a CI run cannot pass by skipping.
//
// The managers under test log errors to stderr; TAINTKIT_TEST_LOG=info or
// debug shows more.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// KubernetesVersion is the version of the kube-apiserver the build script
// builds: the k8s.io/kubernetes requirement of bench/upstream/go.mod.
const KubernetesVersion = "v1.37.2"

// BuildScript builds the kube-apiserver, run from the repository's root.
const BuildScript = "examples/controller/hack/build-kube-apiserver.sh"

var shared struct {
	cfg     *rest.Config
	missing error
	started bool
}

// Main starts the API server and etcd, runs the package's tests, stops both
// and exits with the tests' status. Call it from TestMain.
func Main(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	shared.started = true
	// Errors of the managers under test go to stderr; TAINTKIT_TEST_LOG=info
	// (or debug) shows more.
	level := zapcore.ErrorLevel
	_ = level.Set(os.Getenv("TAINTKIT_TEST_LOG"))
	ctrl.SetLogger(watchServing(zap.New(zap.WriteTo(os.Stderr), zap.Level(level))))
	env := &envtest.Environment{
		// A cold start on a busy 2-core machine takes more than envtest's 20 s.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	apiserver, etcd, err := binaries()
	if err != nil {
		shared.missing = err
		return m.Run()
	}
	env.ControlPlane.APIServer = &envtest.APIServer{Path: apiserver}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	begin := time.Now()
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv: starting envtest:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testenv: envtest (kube-apiserver %s, etcd %s) ready in %v\n", apiserver, etcd, time.Since(begin).Round(time.Millisecond))
	shared.cfg = cfg
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping envtest:", err)
		code = max(code, 1)
	}
	return code
}

// Config returns the admin rest.Config of the API server Main started. If a
// binary was missing it skips t, or fails it when CI is true.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	if !shared.started {
		t.Fatal("testenv: call testenv.Main from TestMain")
	}
	if shared.missing != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(shared.missing)
		}
		t.Skip(shared.missing)
	}
	return rest.CopyConfig(shared.cfg)
}

// binaries returns the paths to give envtest; empty ones are left to
// envtest's lookup in $KUBEBUILDER_ASSETS.
func binaries() (apiserver, etcd string, err error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS") != ""
	apiserver = os.Getenv("TAINTKIT_KUBE_APISERVER")
	if apiserver == "" && !assets {
		cache := os.Getenv("TAINTKIT_CACHE")
		if cache == "" {
			if cache = os.Getenv("XDG_CACHE_HOME"); cache == "" {
				home, _ := os.UserHomeDir()
				cache = filepath.Join(home, ".cache")
			}
			cache = filepath.Join(cache, "taintkit")
		}
		apiserver = filepath.Join(cache, "kube-apiserver-"+KubernetesVersion)
	}
	if apiserver != "" && !executable(apiserver) {
		return "", "", fmt.Errorf("testenv: no kube-apiserver at %s: build it once with %s from the repository's root (5-11 minutes on 2 cores; it prints the path), "+
			"or set TAINTKIT_KUBE_APISERVER or KUBEBUILDER_ASSETS", apiserver, BuildScript)
	}
	etcd = os.Getenv("TAINTKIT_ETCD")
	if etcd == "" && !assets {
		if etcd, err = exec.LookPath("etcd"); err != nil {
			etcd = "/usr/bin/etcd"
		}
	}
	if etcd != "" && !executable(etcd) {
		return "", "", errors.New("testenv: no etcd at " + etcd + ": apt-get install etcd-server, or set TAINTKIT_ETCD or KUBEBUILDER_ASSETS")
	}
	return apiserver, etcd, nil
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

var names atomic.Int64

// Name returns prefix followed by a number unique in the test process:
// namespaces are never removed (envtest runs no namespace controller), and
// go test -count runs a test again in the same process.
func Name(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, names.Add(1))
}
