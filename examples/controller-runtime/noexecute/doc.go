// Package noexecute runs the NoExecute taint manager of
// examples/internal/manager as a controller-runtime [manager.Runnable]
// that needs leader election: the same behaviour as examples/controller
// (evictions at the end of each toleration, DisruptionTarget, deletion with
// a UID precondition, events, taintkit_* metrics, countdowns that a new
// leader ends at the old one's deadlines), with controller-runtime doing
// the informers, the field index, leader election, the secure metrics
// server, the probes and the event recorder.
//
//	r := &noexecute.Runnable{Config: manager.Config{MaxConcurrentEvictions: 32}}
//	if err := r.SetupWithManager(mgr); err != nil { … }
//
// [manager.Runnable]: https://pkg.go.dev/sigs.k8s.io/controller-runtime/pkg/manager#Runnable
package noexecute
