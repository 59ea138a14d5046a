// Package workqueue is a work queue for reconcile loops that can take an
// item back and put it off: client-go's rate-limiting queue and
// controller-runtime's priority queue, plus [Queue.Cancel] and
// [Queue.Schedule], on timedqueue's storage (one timer for the queue, a
// compact heap, millions of waiting items).
//
// A [Queue] implements client-go's workqueue.TypedRateLimitingInterface.
// [NewRateLimiting] keeps the behaviour of client-go's queue, and
// [NewPriority] that of controller-runtime's, where the two differ (each
// says how); package priority makes the latter a controller-runtime
// priorityqueue.PriorityQueue, for controller.Options' NewQueue. Reconcilers
// are written as before; those that know when their object is next due
// call Schedule, and Cancel when it is gone.
//
// # Model
//
// An item is, at any time, queued for nothing, waiting for a time, or
// ready; and, independently, being processed (handed out by Get, not yet
// Done) or not. A key has one entry: adds merge, as in both queues. What a
// call does to an item queued
//
//	call                     for nothing           waiting for t         ready
//	Add, AddAfter(d ≤ 0)     ready                 ready                 no change
//	AddAfter(d), now+d = u   waits for u           waits for min(t, u)   no change
//	Schedule(u), u > now     waits for u           waits for u           waits for u
//	Schedule(u), u ≤ now     ready                 ready                 no change
//	Cancel                   false                 nothing, true         nothing, true
//
// Get hands out a ready item that is not being processed: the highest
// priority first, then the one ready first. An item is never handed out
// to two callers at once: one added while it is processed is handed out
// again after its Done, once ready. A waiting item is ready at its time
// on the queue's clock, never before.
//
// # Time
//
// Times are absolute instants on the queue's clock, compared at full
// precision. Each call takes effect before it returns: a clock step made
// after AddAfter returns is seen by that item.
//
// # Concurrency
//
// All methods are safe for concurrent use. AddAfter, Schedule and Cancel
// are O(log n); Add, Get and Done O(1) amortised. A waiting item costs
// about 80 bytes (a string key's, the key's bytes apart) and no goroutine;
// memory comes back as items go. The queue runs one goroutine, from its
// constructor to ShutDown.
//
// # Metrics
//
// With [Config.Name] and [Config.MetricsProvider], the queue reports
// client-go's workqueue metrics: depth (ready items, those processed
// included), adds (items made ready), queue latency (from ready to handed
// out), work duration, unfinished work and longest running processor
// (updated every 500 ms while items are processed), and retries (adds that
// wait: AddAfter, AddRateLimited, Schedule to a later time).
//
// # Testing with a fake clock
//
// Pass a FakeClock (k8s.io/utils/clock/testing) in [Config.Clock], Step it,
// and wait with synctest.Wait or in Get; call ShutDown at the end, which
// ends the queue's goroutine.
package workqueue
