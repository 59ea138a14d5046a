// Package timedqueue runs work for a key no earlier than a given time, with
// cancel, reschedule, bounded concurrency and retries, on an injectable clock:
// the Kubernetes taint manager's TimedWorkerQueue without a goroutine and a
// timer per item.
//
// # Model
//
// A key has at most one live schedule, made by [TimedWorkerQueue.Schedule] or
// [TimedWorkerQueue.Reschedule] to run its work no earlier than FireAt:
//
//	state        meaning                                     GetWorker  Len  holds a slot
//	pending      waiting for FireAt                          yes        yes  no
//	running      an attempt is in flight                     Running    yes  yes
//	backing off  an attempt failed; waiting for NextAttempt  yes        yes  no
//	withdrawn    cancelled while running: the attempt        no         no   until it returns
//	             finishes, nothing follows
//
// Success ends the schedule and frees the key; a key never runs concurrently
// with itself, and the end of an attempt never disturbs a newer schedule. A
// failed attempt (an error or a recovered panic) is retried per the
// [RetryPolicy] unless [Permanent]; a final failure is logged, counted and
// passed to the hook of [WithFailureHook]. Nothing is dropped silently.
//
// # Time
//
// Times are absolute, inclusive and compared at full precision on the queue's
// clock. Each call takes effect before it returns: a clock step made after
// Schedule returns is seen by that work. Due work waiting for a slot starts in
// NextAttempt order, then in the order scheduled.
//
// # Concurrency
//
// Schedule, Reschedule and CancelWork are O(log n) amortised; a pending
// schedule costs about 90 bytes (a 56-byte entry, its index slot and heap
// node) and no goroutine, and the memory comes back when schedules go. The
// queue runs a timer goroutine and up to MaxConcurrency workers only while
// it has schedules: an
// idle queue needs no Shutdown. Work funcs and hooks may call any method.
// Hooks run on the attempt's worker goroutine, with no lock held, keeping its
// slot: they must not block; Shutdown does not wait for them; their panics
// are recovered.
//
// # Testing with a fake clock
//
// Pass a FakeClock (k8s.io/utils/clock/testing) with [WithClock], Step it, and
// wait with synctest.Wait or on channels fed by the work func and
// [WithRetryHook]. The queue holds at most one waiter on the clock.
package timedqueue
