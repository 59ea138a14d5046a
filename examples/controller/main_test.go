package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary runs main when this variable is set, so the tests below
// see the command's exit codes and output.
const runMain = "TAINTKIT_CONTROLLER_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) != "" {
		main()
	}
	os.Exit(m.Run())
}

func command(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMain+"=1", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), errBuf.String()
	}
	require.NoError(t, err)
	return 0, errBuf.String()
}

func TestInvalidFlagsExit2BeforeStarting(t *testing.T) {
	code, stderr := command(t, "--shards=0", "--kube-api-qps=-1", "--leader-elect-renew-deadline=20s",
		"--kubeconfig=/nonexistent")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--shards must be at least 1, got 0")
	assert.Contains(t, stderr, "--kube-api-qps must be positive, got -1")
	assert.Contains(t, stderr, "--leader-elect-renew-deadline (20s) must be shorter than --leader-elect-lease-duration (15s)")
	assert.NotContains(t, stderr, "nonexistent", "the kubeconfig was read before the flags were checked")
}

func TestUnparsableFlagExit2(t *testing.T) {
	code, stderr := command(t, "--kube-api-qps=fast")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `invalid value "fast" for flag -kube-api-qps`)

	code, stderr = command(t, "--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "flag provided but not defined: -no-such-flag")

	code, stderr = command(t, "extra")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "unexpected arguments")
}

func TestNoConfigurationExit1(t *testing.T) {
	code, stderr := command(t, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no --kubeconfig given and no in-cluster configuration")

	code, stderr = command(t, "--kubeconfig="+filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "kubeconfig")
}
