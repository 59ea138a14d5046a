// Package actor is a controller-runtime controller that acts on each
// ConfigMap once, at the time its act-at annotation says (see
// examples/internal/actat: the action records itself in another
// annotation), on taintkit's workqueue: its event handlers Schedule the
// ConfigMap's request for that time, again when the annotation moves
// (earlier or later), and Cancel it when the annotation or the ConfigMap
// goes. The controller's queue hands a request out once, at its time, and
// Reconcile acts: no reconcile runs for a time that was moved or taken
// back, and none runs for an event that changes no time.
//
// With controller-runtime's own queue, a handler could only AddAfter, whose
// earlier time wins: a moved or deleted ConfigMap would still be reconciled
// at its old time, for Reconcile to find nothing to do.
//
// The schedules live in memory: on start the controller's initial list
// calls the create handler for every ConfigMap, which schedules it again
// (or makes it due at once, if its time passed while no replica ran).
package actor

import (
	"context"
	"sync/atomic"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/taintkit/taintkit/examples/internal/actat"
	"github.com/taintkit/taintkit/workqueue"
	"github.com/taintkit/taintkit/workqueue/priority"
)

// Name is the controller's name (its logger, metrics and work queue).
const Name = "configmap-actor"

// Reconciler acts on ConfigMaps at the time their act-at annotation says.
// Set its fields, then call SetupWithManager once.
type Reconciler struct {
	// Client reads ConfigMaps (from the manager's cache) and patches them.
	Client client.Client
	// Clock is the queue's clock. Nil means clock.RealClock{}.
	Clock clock.Clock

	log   logr.Logger
	queue atomic.Pointer[workqueue.Queue[reconcile.Request]] // set by the controller's NewQueue, before its handlers run
}

// SetupWithManager adds the controller to mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.log = mgr.GetLogger().WithName(Name)
	handlers := handler.TypedFuncs[*v1.ConfigMap, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*v1.ConfigMap], _ clientworkqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.schedule(e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1.ConfigMap], _ clientworkqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.schedule(e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*v1.ConfigMap], _ clientworkqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.queue.Load().Cancel(request(e.Object))
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(controller.Options{NewQueue: r.newQueue}).
		WatchesRawSource(source.Kind(mgr.GetCache(), &v1.ConfigMap{}, handlers)).
		Complete(r)
}

// newQueue is the controller's NewQueue: taintkit's queue, with
// controller-runtime's behaviour and the controller's rate limiter.
func (r *Reconciler) newQueue(name string, rl clientworkqueue.TypedRateLimiter[reconcile.Request]) clientworkqueue.TypedRateLimitingInterface[reconcile.Request] {
	q := priority.New(workqueue.Config[reconcile.Request]{Name: name, RateLimiter: rl, Clock: r.Clock})
	r.queue.Store(q.Queue)
	return q
}

func request(cm *v1.ConfigMap) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}}
}

// schedule makes cm's request due when its action is, at its time, or never.
func (r *Reconciler) schedule(cm *v1.ConfigMap) {
	at, due, err := actat.Due(cm)
	if err != nil {
		r.log.Error(err, "Invalid act-at time: not acting", "configMap", client.ObjectKeyFromObject(cm))
	}
	if !due {
		r.queue.Load().Cancel(request(cm))
		return
	}
	r.queue.Load().Schedule(request(cm), at)
}

// Reconcile acts on the ConfigMap if its action is due: the queue hands
// its request out at that time.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm v1.ConfigMap
	if err := r.Client.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	at, due, _ := actat.Due(&cm)
	if !due {
		return reconcile.Result{}, nil
	}
	if r.Clock.Now().Before(at) {
		// The cache has a time the handlers have not seen yet: they will
		// schedule it too, to the same effect.
		r.queue.Load().Schedule(req, at)
		return reconcile.Result{}, nil
	}
	// A 409 Conflict (the ConfigMap changed since the cache saw it) is
	// retried, rate-limited: the retry reads it again.
	if err := r.Client.Patch(ctx, &cm, client.RawPatch(types.MergePatchType, actat.ActedPatch(&cm))); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("Acted", "actAt", at)
	return reconcile.Result{}, nil
}
