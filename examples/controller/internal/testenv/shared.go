package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shared is the test package's Env, set by Main before any test runs.
var shared struct {
	env     *Env
	missing error // a *MissingBinaryError when Main ran without the binaries
	started bool  // Main ran
}

// startTimeout bounds Main's start-up: a cold start takes a few seconds, more
// on a busy 2-core machine.
const startTimeout = 2 * time.Minute

// logLines is how much of each server's log Main prints when tests fail.
const logLines = 40

// Main starts the test package's Env, runs its tests, stops the Env and exits
// with the tests' status. Call it from TestMain. When tests fail it prints the
// end of both servers' logs. When a binary is missing it runs the tests anyway,
// and [Shared] skips them (or fails them under CI).
func Main(m *testing.M, opts Options) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts Options) int {
	shared.started = true
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	begin := time.Now()
	env, err := Start(ctx, opts)
	cancel()
	if err != nil {
		var missing *MissingBinaryError
		if !errors.As(err, &missing) {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		shared.missing = err
		return m.Run()
	}
	fmt.Fprintf(os.Stderr, "testenv: etcd and kube-apiserver %s ready in %v\n", KubernetesVersion, time.Since(begin).Round(time.Millisecond))
	shared.env = env
	code := m.Run()
	if code != 0 {
		env.dumpLogs(os.Stderr, logLines)
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Shared returns the Env that [Main] started. If a binary was missing it skips
// t with the way to get it, or fails t when the environment variable CI is
// true, so that a CI run cannot pass by skipping.
func Shared(t testing.TB) *Env {
	t.Helper()
	switch {
	case !shared.started:
		t.Fatal("testenv: no shared Env; call testenv.Main from TestMain")
	case shared.missing != nil:
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(shared.missing)
		}
		t.Skip(shared.missing)
	}
	return shared.env
}

// ForTest starts an Env of t's own with opts (for a test that restarts the
// API server or needs other flags than the shared one's) and stops it when t
// ends, printing the end of both servers' logs if t failed. Like [Shared],
// it skips t if a binary is missing, or fails it when CI is true.
func ForTest(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	begin := time.Now()
	env, err := Start(ctx, opts)
	if err != nil {
		var missing *MissingBinaryError
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); errors.As(err, &missing) && !ci {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Logf("testenv: etcd and kube-apiserver %s ready in %v", KubernetesVersion, time.Since(begin).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			env.dumpLogs(&b, logLines)
			t.Log(b.String())
		}
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}
