// Package integration_test runs the controller (app.Run, in process, as its
// ServiceAccount) against a real kube-apiserver and etcd started by
// testenv.Main, and checks the evictions a user sees: when pods go, with
// which condition and events, and when they stay.
//
// The tests run on the real clock. Each states its tolerances; lower bounds
// are measured from the values the server stored (whole seconds), upper
// bounds are generous for a loaded 2-core machine. They wait on watches;
// the only waiting for nothing to happen is a bounded window in which a pod
// must not be deleted. Tests do not run in parallel: each starts its own
// controller, which acts on every namespace and holds the one Lease the
// manifests' Role allows.
package integration_test

import (
	"testing"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
