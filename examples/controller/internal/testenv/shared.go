package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
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
