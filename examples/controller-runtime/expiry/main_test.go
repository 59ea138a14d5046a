// The tests of this package run the expiry controller in controller-runtime
// managers against a real kube-apiserver and etcd that envtest starts
// (internal/testenv), on the real clock: each case's ConfigMap expires a
// few seconds ahead, and the case checks when the controller's DELETE was
// sent (never before the time the annotation finally gave, within 1.5 s
// after it), or that none was.
package expiry_test

import (
	"testing"

	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
