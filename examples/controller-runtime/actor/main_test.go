// The tests of this package run the controller in a controller-runtime
// manager against a real kube-apiserver and etcd that envtest starts
// (internal/testenv), on the real clock: each case's ConfigMap is due a
// few seconds ahead, and the case checks when the controller's action (its
// PATCH) was sent, never before the time the annotation finally gave and
// within 1.5 s after it, or that none was; and that Reconcile ran once for
// each action and for nothing else.
package actor_test

import (
	"testing"

	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
