// Package timedqueue runs work for a key no earlier than a given time, with
// cancel, reschedule, bounded concurrency and retries, on an injectable clock:
// the taint manager's TimedWorkerQueue without a goroutine and timer per item.
//
// Most callers call [TimedWorkerQueue.UpdateWork] each time a key's time is
// decided (it schedules, or moves the schedule), CancelWork when no run is
// due any more, and Shutdown at the end; AddWork keeps the first time given.
//
// # Model
//
// A key has at most one live schedule, to run its work no earlier than FireAt:
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
// failed attempt (an error, a recovered panic, a runtime.Goexit) is retried
// per the [RetryPolicy] unless [Permanent]; a final failure is logged, counted
// and passed to the hook set by [TimedWorkerQueue.SetFailureHook]. Nothing is
// dropped silently.
//
// # Time
//
// Times are absolute, inclusive and compared at full precision on the queue's
// clock. Each call takes effect before it returns: a clock step made after
// AddWork returns is seen by that work. Due work waiting for a slot starts in
// NextAttempt order, then in the order scheduled.
//
// # Concurrency
//
// AddWork, UpdateWork and CancelWork are O(log n); a pending schedule costs
// about 105 bytes and no goroutine, given back when it goes. Goroutines run
// only while there are schedules: an idle queue needs no Shutdown. Work funcs
// and hooks may call any method; hooks run on the worker, with no lock held,
// must not block, and their panics are recovered.
//
// # Testing with a fake clock
//
// Pass a FakeClock (k8s.io/utils/clock/testing) with [WithClock], Step it, and
// wait with synctest.Wait or on channels.
package timedqueue
