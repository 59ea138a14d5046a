package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	code, _, stderr = commandOut(t, args...)
	return code, stderr
}

// commandOut runs main with args and returns its exit code and output.
func commandOut(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMain+"=1", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), outBuf.String(), errBuf.String()
	}
	require.NoError(t, err)
	return 0, outBuf.String(), errBuf.String()
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
	assert.Contains(t, stderr, `invalid argument "fast" for "--kube-api-qps" flag`)
	assert.Contains(t, stderr, "Run taintkit-noexecute --help for the flags.")

	code, stderr = command(t, "--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "unknown flag: --no-such-flag")

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

// --help prints the flags in named sections, as Kubernetes' components do,
// on stdout, and exits 0; -v is klog's verbosity, in the logging section.
func TestHelpPrintsSections(t *testing.T) {
	code, stdout, stderr := commandOut(t, "--help")
	require.Equal(t, 0, code, stderr)
	sections := []string{"Generic flags:", "Leader election flags:", "Eviction flags:", "Serving flags:", "Logging flags:"}
	at := -1
	for _, s := range sections {
		i := strings.Index(stdout, "\n"+s+"\n")
		require.Greater(t, i, at, "section %q missing or out of order:\n%s", s, stdout)
		at = i
	}
	// Each flag in its section: the text between its heading and the next.
	section := func(s string) string {
		i := strings.Index(stdout, s)
		rest := stdout[i+len(s):]
		if j := strings.Index(rest, " flags:\n"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	for s, flags := range map[string][]string{
		"Generic flags:":         {"--kubeconfig", "--kube-api-qps", "--events-qps", "--version"},
		"Leader election flags:": {"--leader-elect ", "--leader-elect-lease-duration"},
		"Eviction flags:":        {"--dry-run", "--use-eviction-api", "--eviction-rate "},
		"Serving flags:":         {"--metrics-bind-address", "--metrics-secure", "--metrics-cert-dir", "--health-probe-bind-address"},
		"Logging flags:":         {"-v, --v Level", "--vmodule"},
	} {
		for _, f := range flags {
			assert.Contains(t, section(s), f, "%s not in %q", f, s)
		}
	}
}

// --version prints the build information and exits 0 without starting.
func TestVersionExit0(t *testing.T) {
	code, stdout, stderr := commandOut(t, "--version", "--kubeconfig=/nonexistent")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `^taintkit-noexecute \S+\ngo: `, stdout)
	assert.NotContains(t, stderr, "nonexistent", "it read the kubeconfig")
}

// -v keeps its one-dash form.
func TestShortVerbosityFlag(t *testing.T) {
	code, _, stderr := commandOut(t, "-v=2", "--shards=0")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--shards must be at least 1, got 0", "-v=2 was not taken")
}
