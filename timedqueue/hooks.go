package timedqueue

import (
	"sync"
	"time"
)

// FailureFunc gets a schedule that finally failed (its last attempt, a
// [Permanent] error, or a failure after Shutdown) as it ended, and its last
// error.
type FailureFunc[K comparable] func(w TimedWorker[K], err error)

// RetryFunc gets a schedule whose attempt failed with err and will be retried
// at w.NextAttempt.
type RetryFunc[K comparable] func(w TimedWorker[K], err error)

// AdmitFunc decides whether due work may start now. It gets the key, the
// schedule's FireAt and the queue's now, and returns the zero time, or any
// time not after now, to start the attempt; or a later time, at which the
// schedule is due again and asks again.
type AdmitFunc[K comparable] func(key K, fireAt, now time.Time) (retryAt time.Time)

// hooks holds a queue's hooks, nil if not set. A queue's hooks are replaced
// whole (copy on write), so a reader sees one consistent set.
type hooks[K comparable] struct {
	failure FailureFunc[K]
	retry   RetryFunc[K]
	admit   AdmitFunc[K]
}

// SetFailureHook makes f the function called for each schedule that finally
// fails, after its key is freed; nil removes it. It may be called at any time:
// failures that end after it returns see f.
func (q *TimedWorkerQueue[K]) SetFailureHook(f FailureFunc[K]) {
	q.setHooks(func(h *hooks[K]) { h.failure = f })
}

// SetRetryHook makes f the function called for each failed attempt once its
// retry is armed (a clock step to w.NextAttempt starts it, even during the
// hook); nil removes it. It may be called at any time.
func (q *TimedWorkerQueue[K]) SetRetryHook(f RetryFunc[K]) {
	q.setHooks(func(h *hooks[K]) { h.retry = f })
}

// SetAdmitFunc makes f the gate every attempt passes before its work func
// runs, so that work can wait for something outside the queue (a rate limit's
// next token, say) without holding a slot; nil removes it. It may be called at
// any time: attempts that start after it returns ask f.
//
// f is asked in the order attempts start, which is NextAttempt order for
// attempts due together, one call at a time, although the attempts run on
// many workers: what f hands out goes in that order. It runs on the worker,
// with no lock of the queue held, and may call the queue's methods; it must
// not block, as attempts started after its own wait for it.
//
// An attempt f refuses is not an attempt: it is not counted in Attempts, no
// hook is called and no retry is used up; the schedule waits for the time f
// returned, holding no slot, as after [RetryAt]. A panic in f is recovered
// and logged, and the attempt starts.
func (q *TimedWorkerQueue[K]) SetAdmitFunc(f AdmitFunc[K]) {
	q.setHooks(func(h *hooks[K]) { h.admit = f })
}

func (q *TimedWorkerQueue[K]) setHooks(change func(*hooks[K])) {
	q.hooksMu.Lock()
	defer q.hooksMu.Unlock()
	h := *q.hooks.Load()
	change(&h)
	q.hooks.Store(&h)
}

// turns makes attempts ask the admit func one at a time, in the order they
// started: the attempt with ticket n asks once ticket n-1 has. Every ticket
// handed out is passed exactly once, by the attempt's own goroutine in a
// deferred call, whatever the admit func does (returns, panics, Goexits).
type turns struct {
	mu   sync.Mutex
	cond sync.Cond
	next uint64 // the ticket whose turn it is; tickets start at 1
}

func (t *turns) wait(ticket uint64) {
	t.mu.Lock()
	for t.next != ticket {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

func (t *turns) pass() {
	t.mu.Lock()
	t.next++
	t.mu.Unlock()
	t.cond.Broadcast()
}

// errNotAdmitted is the reason of a wait an admit func asked for.
var errNotAdmitted = errorString("timedqueue: not admitted yet")

type errorString string

func (e errorString) Error() string { return string(e) }
