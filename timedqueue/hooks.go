package timedqueue

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// FailureFunc gets a schedule as it finally failed, and its last error.
type FailureFunc[K comparable] func(w TimedWorker[K], err error)

// RetryFunc gets a schedule to retry at w.NextAttempt, and the error.
type RetryFunc[K comparable] func(w TimedWorker[K], err error)

// AdmitFunc decides whether due work may start now: it returns a time not
// after now (the zero time, say) to start it, or when to ask again.
type AdmitFunc[K comparable] func(key K, fireAt, now time.Time) (retryAt time.Time)

// hooks holds a queue's hooks, nil if not set, guarded by the queue's mutex.
type hooks[K comparable] struct {
	failure FailureFunc[K]
	retry   RetryFunc[K]
	admit   AdmitFunc[K]
}

// SetFailureHook makes f the function called for each schedule that finally
// fails, after its key is freed; nil removes it.
func (q *TimedWorkerQueue[K]) SetFailureHook(f FailureFunc[K]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hooks.failure = f
}

// SetRetryHook makes f the function called for each failed attempt once its
// retry is armed (a step to w.NextAttempt starts it); nil removes it.
func (q *TimedWorkerQueue[K]) SetRetryHook(f RetryFunc[K]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hooks.retry = f
}

// SetAdmitFunc makes f the gate every attempt passes before its work func
// runs (a rate limit's token, say); nil removes it. f is asked one call at a
// time, in the order attempts start (NextAttempt order); it may call the queue
// but must not block. A refusal is not an attempt (no Attempts, hook or
// retry): the schedule waits, holding no slot, for the time f gave, and is
// back in line before f is asked about the next attempt, so schedules refused
// until the same time are asked again in the order they were refused. A panic
// in f is logged and admits.
func (q *TimedWorkerQueue[K]) SetAdmitFunc(f AdmitFunc[K]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hooks.admit = f
}

// admitted asks a's admit func whether a may start, or when to ask again.
// Attempts ask one at a time, in the order they started: each waits for the
// one before to pass the turn. An admitted attempt passes it here; a refused
// one (or one whose admit func called runtime.Goexit) once it is settled, so
// that it waits in line again before the next is asked.
func (q *TimedWorkerQueue[K]) admitted(a *attempt[K]) (retryAt time.Time, ok bool) {
	<-a.turn
	defer func() {
		if ok { // also if admit panicked: the recover below admits
			close(a.passTurn)
			a.passTurn = nil
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			q.log.Error(fmt.Errorf("%v", r), "Admit func panicked; starting the attempt", "key", a.key, "stack", string(debug.Stack()))
			retryAt, ok = time.Time{}, true
		}
	}()
	now := q.clock.Now()
	retryAt = a.admit(a.key, a.fireAt, now)
	return retryAt, !retryAt.After(now)
}

// errNotAdmitted is the reason of a wait an admit func asked for.
var errNotAdmitted = errors.New("timedqueue: not admitted yet")
