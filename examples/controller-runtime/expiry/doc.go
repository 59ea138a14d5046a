// Package expiry is a controller-runtime reconciler that deletes each
// ConfigMap at the time its [Annotation] gives, keeping one timed schedule
// per ConfigMap in a [timedqueue.TimedWorkerQueue]: set when the annotation
// appears, moved later or earlier when it changes, cancelled when it goes or
// the ConfigMap is deleted. A schedule that comes due puts the ConfigMap's
// key into the controller's work queue through a [source.TypedFunc]; the
// reconciler re-reads the ConfigMap and deletes it only if the time it now
// gives has passed, with its UID and resourceVersion as preconditions.
//
// The schedules live in memory and are rebuilt from the objects: on start
// the controller's initial list reconciles every ConfigMap, which schedules
// it again (or deletes it, if its time passed while no replica ran).
//
// [source.TypedFunc]: https://pkg.go.dev/sigs.k8s.io/controller-runtime/pkg/source#TypedFunc
package expiry
