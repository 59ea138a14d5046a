// The tests of this package run the Runnable in controller-runtime
// managers against a real kube-apiserver and etcd that envtest starts
// (internal/testenv), on the real clock. Each test has its own namespace,
// nodes and Lease; they do not run in parallel (every Runnable acts on
// every namespace). They wait on watches; the only waiting for nothing to
// happen is a bounded window in which a pod must not be deleted. Deadlines
// are measured from the times the server stored (whole seconds).
package noexecute_test

import (
	"testing"

	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
