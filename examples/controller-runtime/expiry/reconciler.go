package expiry

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/taintkit/taintkit/timedqueue"
)

// Annotation says when a ConfigMap expires, in RFC 3339
// ("2026-01-02T15:04:05Z", fractional seconds allowed). It may be set,
// changed or removed at any time.
const Annotation = "taintkit.example/expire-at"

// Name is the controller's name (its logger, metrics and work queue).
const Name = "configmap-expiry"

// Reconciler deletes ConfigMaps whose Annotation's time has passed. Set
// its fields, then call SetupWithManager once.
type Reconciler struct {
	// Client reads ConfigMaps (from the manager's cache) and deletes them.
	Client client.Client
	// Clock is the schedules' clock. Nil means clock.RealClock{}.
	Clock clock.Clock

	schedules *timedqueue.TimedWorkerQueue[types.NamespacedName]
	work      atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// SetupWithManager adds the controller to mgr: it reconciles ConfigMaps
// when they are created or deleted or their Annotation changes, and when a
// schedule comes due.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	var err error
	r.schedules, err = timedqueue.New(r.due, timedqueue.WithClock(r.Clock), timedqueue.WithName(Name),
		timedqueue.WithLogger(mgr.GetLogger().WithName(Name)))
	if err != nil {
		return fmt.Errorf("expiry: %w", err)
	}
	annotationChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[Annotation] != e.ObjectNew.GetAnnotations()[Annotation]
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1.ConfigMap{}, builder.WithPredicates(annotationChanged)).
		WatchesRawSource(source.TypedFunc[reconcile.Request](r.start)).
		Complete(r)
}

// start is the schedules' source: the controller calls it with its work
// queue before its workers start; when ctx ends, the schedules are dropped.
func (r *Reconciler) start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.work.Store(&q)
	context.AfterFunc(ctx, func() { _ = r.schedules.Shutdown(context.Background()) })
	return nil
}

// due is the schedules' work: put the key into the controller's work queue.
func (r *Reconciler) due(_ context.Context, key types.NamespacedName) error {
	q := r.work.Load()
	if q == nil {
		return errors.New("expiry: the controller has not started")
	}
	(*q).Add(reconcile.Request{NamespacedName: key})
	return nil
}

// Scheduled returns when the ConfigMap namespace/name is scheduled to be
// looked at again, if it is. Call it after SetupWithManager.
func (r *Reconciler) Scheduled(key types.NamespacedName) (time.Time, bool) {
	w, ok := r.schedules.GetWorker(key)
	return w.FireAt, ok
}

// Reconcile makes the ConfigMap's schedule agree with its Annotation, and
// deletes the ConfigMap once that time has passed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.NamespacedName
	var cm v1.ConfigMap
	if err := r.Client.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			r.schedules.CancelWork(key)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	value, ok := cm.Annotations[Annotation]
	if !ok || cm.DeletionTimestamp != nil {
		r.schedules.CancelWork(key)
		return reconcile.Result{}, nil
	}
	at, err := time.Parse(time.RFC3339, value)
	if err != nil {
		// Not retried: the next change of the annotation is reconciled.
		r.schedules.CancelWork(key)
		log.FromContext(ctx).Error(err, "Invalid expiry time: not deleting", "annotation", Annotation)
		return reconcile.Result{}, nil
	}
	if now := r.Clock.Now(); now.Before(at) {
		r.schedules.UpdateWork(key, now, at)
		return reconcile.Result{}, nil
	}
	r.schedules.CancelWork(key)
	// Delete what was read, and nothing newer: a ConfigMap recreated under
	// the name (another UID), or changed since the cache saw it (another
	// resourceVersion: its annotation may have moved), is refused with a
	// 409 Conflict, and the retry reads it again.
	err = r.Client.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	log.FromContext(ctx).Info("Deleted an expired ConfigMap", "expireAt", value)
	return reconcile.Result{}, nil
}
