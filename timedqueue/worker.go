package timedqueue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// PanicError is the error of an attempt whose work func panicked.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the stack at the panic, as runtime/debug.Stack gives it
}

// Error returns "timedqueue: panic: " followed by the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("timedqueue: panic: %v", e.Value) }

// ErrGoexit is the error of an attempt whose work func called runtime.Goexit,
// as t.FailNow does. The attempt fails as if the work func had returned it.
var ErrGoexit = errors.New("timedqueue: work func called runtime.Goexit")

// attempt is one run of a work func.
type attempt[K comparable] struct {
	key      K
	gen      uint32                  // the schedule's: if the key's entry no longer has it, the schedule was withdrawn
	first    bool                    // first attempt of its schedule: lateness is observed
	late     float64                 // start − FireAt, seconds
	wc       *workCtx[K]             // this attempt's identity
	ctx      context.Context         // the work func's ctx: wc, or a timedCtx around it
	cancel   context.CancelCauseFunc // nil without an attempt timeout
	deadline moment                  // with an attempt timeout
	tpos     int                     // index in q.deadlines.timed, -1 if not there
	ticket   uint64                  // the admit func's turn, 0 if none was set when it began
	admit    AdmitFunc[K]            // with ticket
	fireAt   time.Time               // with ticket: the schedule's, for admit
}

// outcome is what the end of an attempt reports once the lock is released.
type outcome[K comparable] struct {
	key  K // of the attempt: the worker may reuse the attempt for its next one
	kind int
	hook func(TimedWorker[K], error) // to call for outcomeRetry or outcomeFinal, if set
	w    TimedWorker[K]              // the schedule when it ended
	err  error
	wait time.Duration
}

const (
	outcomeNone = iota
	outcomeRetry
	outcomeFinal
	outcomeWithdrawnFailed
	outcomeDeferred     // the work func returned RetryAt
	outcomeDeferDropped // RetryAt after Shutdown: the schedule is dropped
)

// startDueLocked starts due schedules, in (NextAttempt, gen) order, while
// concurrency slots are free, each on a new worker goroutine.
func (q *TimedWorkerQueue[K]) startDueLocked(now moment, d *delta) {
	for q.active < q.max {
		a := q.takeDueLocked(now, nil, d)
		if a == nil {
			return
		}
		q.active++
		d.running++
		go q.worker(a)
	}
}

// takeDueLocked begins the earliest schedule if it is due, in attempt a
// (reused) or a new one, and returns the attempt; or nil.
func (q *TimedWorkerQueue[K]) takeDueLocked(now moment, a *attempt[K], d *delta) *attempt[K] {
	if n, ok := q.s.head(); q.down.closed || !ok || now.before(n.at) {
		return nil
	}
	d.pending--
	return q.beginLocked(q.s.pop(), now, a, d)
}

// beginLocked marks slot i, just taken from the heap, running and returns its
// attempt: a, reused, or a new one if a is nil.
func (q *TimedWorkerQueue[K]) beginLocked(i int32, now moment, a *attempt[K], d *delta) *attempt[K] {
	e := q.s.at(i)
	if e.attempts > 0 {
		d.backoff-- // it was backing off
	}
	e.state = stateRunning
	if a == nil {
		a = new(attempt[K])
	}
	*a = attempt[K]{key: e.key, gen: e.gen, first: e.attempts == 0 && !e.deferred, tpos: -1}
	if a.first {
		a.late = now.secondsSince(e.fire)
	}
	if admit := q.hooks.admit; admit != nil {
		a.ticket, a.admit, a.fireAt = q.turns.take(), admit, e.fire.time(e.fireLoc)
	}
	// Each attempt gets a ctx of its own, even without a timeout: it tells
	// Shutdown which attempt its caller belongs to (see workCtx).
	a.wc = &workCtx[K]{Context: q.baseCtx, q: q, running: true}
	a.ctx = a.wc
	if q.timeout <= 0 {
		return a
	}
	cctx, cancel := context.WithCancelCause(q.baseCtx)
	a.cancel = cancel
	a.deadline = now.add(q.timeout)
	a.wc.Context = cctx
	a.ctx = &timedCtx[K]{workCtx: a.wc, deadline: a.deadline}
	q.deadlines.add(a)
	return a
}

// worker runs attempts until none is due, then exits. It starts with a. If a
// work func calls runtime.Goexit, the deferred func settles its attempt and
// hands the next one to a new goroutine (hookThenRelease does so for a hook).
func (q *TimedWorkerQueue[K]) worker(a *attempt[K]) {
	inWork := false
	defer func() {
		if !inWork {
			return
		}
		if next := q.finish(a, ErrGoexit); next != nil {
			go q.worker(next)
		}
	}()
	for a != nil {
		inWork = true
		err := q.run(a)
		inWork = false
		a = q.finish(a, err)
	}
}

// finish settles a, reports it, calls a hook if needed and returns the next
// attempt for this worker.
func (q *TimedWorkerQueue[K]) finish(a *attempt[K], err error) *attempt[K] {
	var o outcome[K]
	next, wait := q.settle(a, err, &o)
	q.report(&o)
	if wait {
		return q.hookThenRelease(a, &o)
	}
	return next
}

// hookThenRelease calls the failure or retry hook, then gives the slot up or
// takes the next due attempt (reusing a), even if the hook calls Goexit.
func (q *TimedWorkerQueue[K]) hookThenRelease(a *attempt[K], o *outcome[K]) *attempt[K] {
	returned := false
	defer func() {
		if !returned {
			if next := q.release(a); next != nil {
				go q.worker(next)
			}
		}
	}()
	q.callHook(o)
	returned = true
	return q.release(a)
}

// run calls the work func for a, recovering a panic into a *PanicError.
func (q *TimedWorkerQueue[K]) run(a *attempt[K]) (err error) {
	admitted, retryAt := true, time.Time{}
	if a.ticket != 0 {
		retryAt, admitted = q.admitted(a)
	}
	if a.first {
		q.m.lateness.Observe(a.late)
	}
	if !admitted {
		if a.cancel != nil {
			a.cancel(context.Canceled)
		}
		return RetryAt(retryAt, errNotAdmitted)
	}
	var start time.Time
	if q.m.timeWork {
		start = q.clock.Now()
	}
	defer func() {
		if r := recover(); r != nil {
			pe := &PanicError{Value: r, Stack: debug.Stack()}
			q.log.Error(pe, "Work func panicked", "key", a.key, "stack", string(pe.Stack))
			err = pe
		}
		if q.m.timeWork {
			q.m.workDuration.Observe(q.clock.Since(start).Seconds())
		}
		if a.cancel != nil {
			a.cancel(context.Canceled)
		}
	}()
	return q.work(a.ctx, a.key)
}

// settle records the end of attempt a with error err. It returns the next
// attempt this worker should run, unless o needs a hook (wait is true): then
// the worker keeps its slot until it has called the hook and
// [TimedWorkerQueue.release].
func (q *TimedWorkerQueue[K]) settle(a *attempt[K], err error, o *outcome[K]) (next *attempt[K], wait bool) {
	var d delta
	o.key = a.key
	// Read outside the lock, to keep the critical section short: a reading
	// a little early is still a valid now (the pump that follows the
	// slot's release sees a step made meanwhile).
	now := momentOf(q.clock.Now())
	q.mu.Lock()
	h := q.hooks
	q.deadlines.remove(a)
	q.returnedLocked(a.wc)
	s := &q.s
	// Found by key (slots move when the store shrinks); the entry is this
	// attempt's if it is running with the attempt's gen.
	i, pos, _ := s.index.find(&s.slab, a.key)
	var e *entry[K]
	if i >= 0 {
		e = s.at(i)
	}
	ra := retryAtOf(err)
	switch {
	case e == nil || e.state != stateRunning || e.gen != a.gen:
		// Withdrawn while it ran: a newer schedule of the key is left alone,
		// but released if it waited for this attempt.
		delete(q.withdrawn, a.key)
		if e != nil && e.state == stateBlocked {
			s.push(i)
		}
		if err != nil && ra == nil {
			o.kind, o.err = outcomeWithdrawnFailed, err
		}
	case err == nil:
		s.remove(i, pos)
	case ra != nil:
		// Not a failure: no attempt is counted and no hook is called.
		if q.down.closed {
			s.remove(i, pos)
			d.drops++
			o.kind, o.err = outcomeDeferDropped, err
			break
		}
		e.deferred = true
		e.next = momentOf(ra.at)
		if e.next.before(now) {
			e.next = now
		}
		s.push(i)
		d.pending++
		if e.attempts > 0 {
			d.backoff++
		}
		o.kind, o.err = outcomeDeferred, err
	default:
		e.attempts++
		if !q.down.closed && !IsPermanent(err) && int(e.attempts) < q.retry.MaxAttempts {
			o.kind, o.err = outcomeRetry, err
			o.wait = q.retry.backoff(int(e.attempts))
			e.next = now.add(o.wait)
			s.push(i)
			d.pending++
			d.retries++
			d.backoff++
			if o.hook = h.retry; o.hook != nil {
				o.w = q.snapshotLocked(e)
			} else {
				o.w.Attempts = int(e.attempts) // for the log
			}
		} else {
			o.kind, o.err, o.hook = outcomeFinal, err, h.failure
			o.w = q.snapshotLocked(e)
			o.w.Running = false
			s.remove(i, pos)
			d.failures++
		}
	}
	s.shrink() // no slot number is used below
	if o.hook != nil {
		q.down.hooking++
		q.notifyLocked() // Shutdown does not wait for a worker in a hook
		if o.kind == outcomeRetry {
			q.pumpLocked(&d) // arm the timer for the retry before the hook runs
		}
		q.mu.Unlock()
		q.m.apply(d)
		return nil, true
	}
	next = q.nextLocked(&d, now, a)
	q.mu.Unlock()
	q.m.apply(d)
	return next, false
}

// release is settle's second half when a hook had to be called first.
func (q *TimedWorkerQueue[K]) release(a *attempt[K]) *attempt[K] {
	var d delta
	q.mu.Lock()
	q.down.hooking--
	next := q.nextLocked(&d, momentOf(q.clock.Now()), a)
	q.mu.Unlock()
	q.m.apply(d)
	return next
}

// nextLocked returns the next due attempt for a worker that has just finished
// one, keeping its slot; or gives the slot up and returns nil.
func (q *TimedWorkerQueue[K]) nextLocked(d *delta, now moment, a *attempt[K]) *attempt[K] {
	if a = q.takeDueLocked(now, a, d); a == nil {
		q.active--
		d.running--
		q.notifyLocked()
	}
	q.pumpLocked(d)
	return a
}

// report logs the outcome of an attempt.
func (q *TimedWorkerQueue[K]) report(o *outcome[K]) {
	switch o.kind {
	case outcomeRetry:
		q.log.V(4).Info("Work failed; will retry", "key", o.key, "attempts", o.w.Attempts, "backoff", o.wait, "err", o.err)
	case outcomeFinal:
		q.log.Error(o.err, "Work failed; giving up", "key", o.key, "attempts", o.w.Attempts, "permanent", IsPermanent(o.err))
	case outcomeWithdrawnFailed:
		q.log.V(2).Info("Withdrawn work failed; not retried", "key", o.key, "err", o.err)
	case outcomeDeferred:
		q.log.V(4).Info("Work deferred", "key", o.key, "until", retryAtOf(o.err).at, "reason", errors.Unwrap(retryAtOf(o.err)))
	case outcomeDeferDropped:
		q.log.V(2).Info("Deferred work dropped at shutdown", "key", o.key)
	}
}

// callHook calls the failure or retry hook for o, recovering a panic.
func (q *TimedWorkerQueue[K]) callHook(o *outcome[K]) {
	defer func() {
		if r := recover(); r != nil {
			q.log.Error(fmt.Errorf("%v", r), "Hook panicked", "key", o.w.Key, "stack", string(debug.Stack()))
		}
	}()
	o.hook(o.w, o.err)
}
