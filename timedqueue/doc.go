// Package timedqueue runs work for a key no earlier than a given time, with
// cancel, reschedule in either direction, bounded concurrency and retries, on an
// injectable clock.
//
// It generalises the TimedWorkerQueue of the Kubernetes taint-eviction
// controller and fixes its defects: one goroutine and one runtime timer per item
// are replaced by a compact heap, one timer and a bounded pool of workers; the
// fire time is absolute; a key is released after success; failures are retried
// and reported; panics are recovered; CancelWork reports true only when the work
// will never start.
//
// # Model
//
// A schedule is what one [TimedWorkerQueue.AddWork], or one
// [TimedWorkerQueue.UpdateWork] that (re)schedules, asks for: run the work for
// the key no earlier than FireAt. Each key has at most one live schedule, in one
// of these states:
//
//	state        meaning                                   GetWorker  Len  holds a slot
//	pending      waiting for FireAt                        yes        yes  no
//	running      an attempt is in flight                   Running    yes  yes
//	backing off  an attempt failed; waiting for NextAttempt yes       yes  no
//	withdrawn    cancelled while running; the attempt      no         no   until it returns
//	             finishes, nothing follows
//
// The calls act on them as follows:
//
//	call        absent      pending/backing off          running            withdrawn (no new schedule)
//	AddWork     schedule,   no change, false             no change, false   schedule, true; it starts no earlier
//	            true                                                        than FireAt and not before the
//	                                                                        withdrawn attempt returns
//	UpdateWork  as AddWork  FireAt !Equal: reschedule,   no change, false   as AddWork
//	                        CreatedAt replaced, Attempts
//	                        reset, true; Equal: no
//	                        change (a backoff goes on),
//	                        false
//	CancelWork  false       removed, true: the work      withdrawn, false   false
//	                        will never start for it
//
// Success ends the schedule and releases the key at once. The end of an attempt
// never removes or disturbs a newer schedule for the same key, and work for one
// key never runs concurrently with itself. Each schedule ends in at most one
// successful run and at most RetryPolicy.MaxAttempts attempts.
//
// A failed attempt (an error, or a panic, recovered as a *[PanicError]) is
// retried after InitialBackoff·2^(n-1), capped at MaxBackoff (see
// [RetryPolicy]), unless its error is [Permanent]. After the last attempt the
// schedule ends, the key is released and the failure is reported: logged,
// counted (see [MetricsProvider]) and passed to the hook of [WithFailureHook].
// Nothing is dropped silently.
//
// # Time
//
// FireAt is absolute and inclusive: the work starts no earlier than FireAt as
// read from the queue's clock ([WithClock]), and a FireAt at or before now
// starts as soon as a concurrency slot is free. CreatedAt is caller metadata.
// Every call takes effect before it returns: a clock step made after AddWork
// returns is seen by that work. Times are compared as Unix nanoseconds (wall
// clock); a FireAt after the year 2262 never fires.
//
// At most MaxConcurrency work funcs run at once ([WithMaxConcurrency], default
// [DefaultMaxConcurrency]); due schedules beyond that start in NextAttempt
// order, ties in the order they were scheduled. An optional per-attempt timeout
// ([WithAttemptTimeout]) cancels the work's ctx on the same clock.
//
// # Concurrency
//
// All methods are safe for concurrent use and may be called from work funcs and
// hooks: callbacks run without internal locks held. AddWork, UpdateWork and
// CancelWork are O(log n) amortised; a pending schedule costs no goroutine and
// no timer. The queue's goroutines start on demand: one timer goroutine, with
// the queue's one timer, while a schedule waits for a future time (or an
// attempt for its timeout), and at most MaxConcurrency worker goroutines while
// work is due. They exit when there is nothing to wait for: a queue with no
// live schedule holds no goroutine and no armed timer, even if it is never
// shut down.
//
// [TimedWorkerQueue.Shutdown] refuses new work, drops pending and backing-off
// schedules (logged and counted), cancels the ctx of running work funcs and
// waits for them. The return of every work func happens before Shutdown
// returns nil.
//
// # Testing with a fake clock
//
// Pass a k8s.io/utils/clock/testing.FakeClock with [WithClock], move it with
// Step, and let the work goroutines settle with testing/synctest's Wait (or wait
// on channels the work func writes to). The queue holds at most one waiter on
// the clock, so FakeClock.Waiters (0 or 1) tells whether its timer is armed; it
// is 0 once the queue has no live schedule. A test need not shut down a queue
// left idle, but must shut down one that still holds schedules:
// synctest.Test fails if a goroutine outlives the bubble.
package timedqueue
