// Package priority makes a [workqueue.Queue] of [workqueue.NewPriority] a
// controller-runtime [priorityqueue.PriorityQueue], the queue a
// controller-runtime controller takes through controller.Options' NewQueue:
//
//	var queue atomic.Pointer[workqueue.Queue[reconcile.Request]]
//	opts := controller.Options{
//		NewQueue: func(name string, rl clientworkqueue.TypedRateLimiter[reconcile.Request]) clientworkqueue.TypedRateLimitingInterface[reconcile.Request] {
//			q := priority.New(workqueue.Config[reconcile.Request]{Name: name, RateLimiter: rl})
//			queue.Store(q.Queue) // for the reconciler's Schedule and Cancel
//			return q
//		},
//	}
//
// It is a package of its own because controller-runtime's priorityqueue,
// whose AddOpts its AddWithOpts takes, sets client-go's global
// MetricsProvider when it is initialised: a program on client-go alone
// imports package workqueue without it.
package priority

import (
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/taintkit/taintkit/workqueue"
)

// Queue is a [workqueue.Queue] with controller-runtime's AddOpts.
type Queue[T comparable] struct {
	*workqueue.Queue[T]
}

var _ priorityqueue.PriorityQueue[string] = Queue[string]{}

// New returns a Queue of [workqueue.NewPriority]: controller-runtime's
// behaviour where its queue and client-go's differ.
func New[T comparable](cfg workqueue.Config[T]) Queue[T] {
	return Queue[T]{workqueue.NewPriority(cfg)}
}

// AddWithOpts is [workqueue.Queue.AddWithOpts] with controller-runtime's
// AddOpts.
func (q Queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	q.Queue.AddWithOpts(workqueue.AddOpts(o), items...)
}
