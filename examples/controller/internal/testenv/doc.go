// Package testenv runs a real kube-apiserver backed by a real etcd on 127.0.0.1
// for the integration tests of examples/controller, and stands in for the
// parts of a cluster those tests need but a bare API server lacks: a kubelet
// that finishes pod deletions, a scheduler that binds pods, and a node
// lifecycle controller that stamps NoExecute taints with TimeAdded.
//
// # Usage
//
// One Env serves a whole test package. Start it from TestMain with [Main] and
// take it in each test with [Shared]:
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
//
//	func TestSomething(t *testing.T) {
//		env := testenv.Shared(t)
//		c := env.Client()
//		...
//	}
//
// Tests share the server, so each uses its own namespace and node names.
// Without the binaries a test is skipped with the command that builds them;
// when CI is true it fails instead, so a CI run cannot pass by skipping.
//
// # Binaries
//
// etcd is Debian's etcd-server package (apt-get install etcd-server), or the
// file named by $TAINTKIT_ETCD. The kube-apiserver is built once from
// k8s.io/kubernetes through the Go module proxy by
// examples/controller/hack/build-kube-apiserver.sh into a cache directory, or
// is the file named by $TAINTKIT_KUBE_APISERVER. It is built in bench/upstream,
// the module of everything built from k8s.io/kubernetes, so that this module
// does not require all of Kubernetes.
//
// # Why not envtest
//
// controller-runtime's envtest does the same start-up, but we need only
// start/stop, certificates and a rest.Config, on the same binaries; a
// controller written on plain client-go should not need controller-runtime's
// test harness to be tested. The in-process test server of k8s.io/kubernetes
// (cmd/kube-apiserver/app/testing) would put all of Kubernetes into every
// test binary: a five-minute build under -race instead of one cached binary.
//
// # What the server is
//
// The API server authorizes with RBAC only, and admits with its default
// plugins except ServiceAccount (there is no controller-manager to create
// tokens). Admission still adds the 300 s not-ready and unreachable
// tolerations to new pods. Nothing schedules, runs, or garbage-collects:
// a Deployment creates no pods, a namespace being deleted stays Terminating,
// and a bound pod that is deleted stays, with a deletionTimestamp, until
// something deletes it with grace period 0 ([StartPodFinaliser] does). A
// metav1.Time is stored in whole seconds: measure from the stored value.
//
// The admin identity is a client certificate in the group system:masters;
// [Env.ImpersonatedConfig] acts as a ServiceAccount, so RBAC rules are
// enforced exactly as for the controller in a cluster.
package testenv
