// Package kube is what the two example controllers share on a real
// cluster: one Prometheus adapter for the taint manager, its timed queue
// and its dispatcher ([Metrics]), and one pod client that writes the
// DisruptionTarget condition, deletes and evicts with a UID precondition
// ([PodClient]).
//
// It is internal to examples/: both controllers import it, users cannot.
// Package kubecr puts the pod client on a controller-runtime client, apart
// so that examples/controller does not link controller-runtime. Package
// kubetest holds what both controllers' tests use: a fake API server
// that checks UIDs as the real one does, and readers of gathered metrics.
package kube
