package binary_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// countingServer stands in for an API server and counts the requests it
// gets, answering each with 503.
func countingServer(t *testing.T) (kubeconfig string, requests *atomic.Int64) {
	t.Helper()
	requests = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "counting server", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, testenv.WriteKubeconfig(kubeconfig, &rest.Config{Host: srv.URL}))
	return kubeconfig, requests
}

// Bad flag values: exit 2 with every problem named, and not a single
// request to the API server. The same kubeconfig with good flags does
// reach the server, so the count of zero means something.
func TestBinaryBadFlagsExit2BeforeAnyRequest(t *testing.T) {
	kubeconfig, requests := countingServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, controllerBin,
		"--kubeconfig="+kubeconfig,
		"--kube-api-qps=0",
		"--kube-api-burst=0",
		"--leader-elect-renew-deadline=20s", // not shorter than the 15 s lease
		"--metrics-bind-address=localhost",
		"--max-concurrent-evictions=-3",
		"--eviction-fallback-after=5m", // without --use-eviction-api
		"--eviction-rate=-1",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "run: %v; stderr:\n%s", err, stderr.String())
	assert.Equal(t, 2, exit.ExitCode(), "stderr:\n%s", stderr.String())
	for _, want := range []string{
		"invalid flags",
		"--kube-api-qps must be positive, got 0",
		"--kube-api-burst must be at least 1, got 0",
		"--leader-elect-renew-deadline (20s) must be shorter than --leader-elect-lease-duration (15s)",
		`--metrics-bind-address: want host:port or "0", got "localhost"`,
		"--max-concurrent-evictions must be at least 1, got -3",
		"--eviction-fallback-after (5m0s) needs --use-eviction-api",
		"--eviction-rate must be a finite number ≥ 0, got -1",
	} {
		assert.Contains(t, stderr.String(), want)
	}
	assert.Zero(t, requests.Load(), "requests to the API server before the flags were checked")

	// The control: good flags, the same kubeconfig. The server's 503s keep
	// the informers from syncing; SIGTERM then stops it cleanly.
	good := exec.CommandContext(ctx, controllerBin, "--kubeconfig="+kubeconfig,
		"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0")
	var goodErr bytes.Buffer
	good.Stderr = &goodErr
	require.NoError(t, good.Start())
	// The only thing to wait on is the server's counter: checked every
	// 50 ms until ctx's deadline.
	for requests.Load() == 0 {
		select {
		case <-ctx.Done():
			_ = good.Process.Kill()
			_ = good.Wait()
			t.Fatalf("the controller made no request with good flags: %v\n%s", ctx.Err(), goodErr.String())
		case <-time.After(pollInterval):
		}
	}
	require.NoError(t, good.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, good.Wait(), "exit after SIGTERM before the caches synced; stderr:\n%s", goodErr.String())
}
