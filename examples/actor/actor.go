// Package actor is a client-go controller that acts on each ConfigMap once,
// at the time its act-at annotation says (see examples/internal/actat: the
// action records itself in another annotation), on taintkit's workqueue:
// its informer's handlers Schedule the ConfigMap's key for that time, again
// when the annotation moves (earlier or later), and Cancel it when the
// annotation or the ConfigMap goes. The queue hands a key out once, at its
// time, and a worker acts: no key is handed out for a time that was moved
// or taken back, nor for an event that changes no time.
//
// It is examples/controller-runtime/actor on client-go alone: an informer,
// a lister, workers, and a queue of [workqueue.NewRateLimiting].
package actor

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clientworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/examples/internal/actat"
	"github.com/taintkit/taintkit/workqueue"
)

// Name is the controller's name (its logger and work queue).
const Name = "configmap-actor"

// Config configures a Controller. Every field is optional.
type Config struct {
	// Clock is the queue's clock. Nil means clock.RealClock{}.
	Clock clock.Clock
	// MetricsProvider makes the queue's metrics, named Name. Nil means none.
	MetricsProvider clientworkqueue.MetricsProvider
	// Logger is the controller's logger. The zero Logger means klog's.
	Logger logr.Logger
}

// Controller acts on ConfigMaps at the time their act-at annotation says.
type Controller struct {
	client kubernetes.Interface
	lister corelisters.ConfigMapLister
	synced cache.InformerSynced
	queue  *workqueue.Queue[cache.ObjectName]
	clock  clock.Clock
	log    logr.Logger
}

// New returns a controller that reads ConfigMaps from informer and patches
// them through client. Start informer's factory, then call Run.
func New(client kubernetes.Interface, informer coreinformers.ConfigMapInformer, cfg Config) (*Controller, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = klog.Background()
	}
	c := &Controller{
		client: client,
		lister: informer.Lister(),
		queue: workqueue.NewRateLimiting(workqueue.Config[cache.ObjectName]{
			Name: Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock}),
		clock: cfg.Clock,
		log:   cfg.Logger.WithName(Name),
	}
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.schedule,
		UpdateFunc: func(_, obj any) { c.schedule(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
				c.queue.Cancel(key)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	c.synced = reg.HasSynced
	return c, nil
}

// schedule makes obj's key due when its action is, at its time, or never.
func (c *Controller) schedule(obj any) {
	cm, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := cache.NewObjectName(cm.GetNamespace(), cm.GetName())
	at, due, err := actat.Due(cm)
	if err != nil {
		c.log.Error(err, "Invalid act-at time: not acting", "configMap", key)
	}
	if !due {
		c.queue.Cancel(key)
		return
	}
	c.queue.Schedule(key, at)
}

// Run runs workers until ctx ends, then shuts the queue down and returns
// once they have. The queue is not used again.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.log.Info("Caches synced, starting workers", "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

// next acts on the next key the queue hands out, and reports whether the
// queue still runs.
func (c *Controller) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.act(ctx, key); err != nil {
		c.log.V(2).Info("Act failed; will retry", "configMap", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// act acts on the ConfigMap if its action is due: the queue hands its key
// out at that time.
func (c *Controller) act(ctx context.Context, key cache.ObjectName) error {
	cm, err := c.lister.ConfigMaps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	at, due, _ := actat.Due(cm)
	if !due {
		return nil
	}
	if c.clock.Now().Before(at) {
		// The cache has a time the handlers have not seen yet: they will
		// schedule it too, to the same effect.
		c.queue.Schedule(key, at)
		return nil
	}
	// A 409 Conflict (the ConfigMap changed since the cache saw it) is
	// retried, rate-limited: the retry reads it again.
	_, err = c.client.CoreV1().ConfigMaps(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, actat.ActedPatch(cm), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || errors.Is(err, context.Canceled) {
		return nil
	}
	if err == nil {
		c.log.Info("Acted", "configMap", key, "actAt", at)
	}
	return err
}
