package timedqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	admit    AdmitFunc[K]            // nil if none was set when it began
	turn     <-chan struct{}         // with admit: closed when it may ask admit
	passTurn chan struct{}           // with admit: closed once it asked and, if refused, was settled; then nil
	fireAt   time.Time               // with admit: the schedule's
}

// takeDueLocked begins the earliest schedule if due, in a (or new), or returns nil.
func (q *TimedWorkerQueue[K]) takeDueLocked(now moment, a *attempt[K], d *delta) *attempt[K] {
	if n, ok := q.s.head(); q.down.closed || !ok || now.before(n.at) {
		return nil
	}
	d.pending--
	e := q.s.at(q.s.pop())
	if e.attempts > 0 {
		d.backoff-- // it was backing off
	}
	e.state = stateRunning
	if a == nil {
		a = new(attempt[K])
	}
	*a = attempt[K]{key: e.key, gen: e.gen, first: e.attempts == 0 && !e.deferred}
	if a.first {
		a.late = now.secondsSince(e.fire)
	}
	if q.hooks.admit != nil {
		a.admit, a.turn, a.passTurn = q.hooks.admit, q.lastTurn, make(chan struct{})
		a.fireAt, q.lastTurn = q.s.snapshot(e).FireAt, a.passTurn
	}
	// A ctx of its own, even without a timeout, tells Shutdown its caller.
	a.wc = &workCtx[K]{Context: q.baseCtx, q: q, running: true}
	a.ctx = a.wc
	if q.timeout > 0 {
		a.wc.Context, a.cancel = context.WithCancelCause(q.baseCtx)
		a.deadline = now.add(q.timeout)
		a.ctx = &timedCtx[K]{workCtx: a.wc, deadline: a.deadline}
		if q.deadlines.timed[a] = struct{}{}; a.deadline.before(q.deadlines.min) {
			q.deadlines.min = a.deadline
		}
	}
	return a
}

// worker runs attempts, from a, until none is due (a nil a: none). If a work
// func calls runtime.Goexit, the deferred func settles its attempt and hands
// the next one to a new goroutine (finish does so for a hook).
func (q *TimedWorkerQueue[K]) worker(a *attempt[K]) {
	inWork := false
	defer func() {
		if inWork {
			go q.worker(q.finish(a, ErrGoexit))
		}
	}()
	for a != nil {
		inWork = true
		err := q.run(a)
		inWork = false
		a = q.finish(a, err)
	}
}

// finish settles a, logs it, calls a hook, and returns the worker's next attempt.
func (q *TimedWorkerQueue[K]) finish(a *attempt[K], err error) *attempt[K] {
	held := a.passTurn // not passed yet (refused, or admit called Goexit): pass it once settled
	next, log, hook := q.settle(a, err)
	if held != nil {
		close(held)
	}
	if log != nil {
		log()
	}
	if hook == nil {
		return next
	}
	// Call the hook, then release the slot, even if the hook calls Goexit.
	returned := false
	defer func() {
		if !returned {
			go q.worker(q.release(a))
		}
	}()
	q.callHook(a.key, hook)
	returned = true
	return q.release(a)
}

// run calls the work func for a, recovering a panic into a *PanicError.
func (q *TimedWorkerQueue[K]) run(a *attempt[K]) (err error) {
	if a.cancel != nil {
		defer a.cancel(context.Canceled)
	}
	admitted, retryAt := true, time.Time{}
	if a.admit != nil {
		retryAt, admitted = q.admitted(a)
	}
	if a.first {
		q.m.lateness.Observe(a.late)
	}
	if !admitted {
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
	}()
	return q.work(a.ctx, a.key)
}

// settle records the end of attempt a and returns what to log, and the next
// attempt; or, with a hook to call, keeps the slot for release to free.
func (q *TimedWorkerQueue[K]) settle(a *attempt[K], err error) (next *attempt[K], log, hook func()) {
	var d delta
	key := a.key // a may be reused before log runs
	// Read outside the lock: a reading a little early is still a valid now
	// (the pump at the slot's release sees a step made meanwhile).
	now := momentOf(q.clock.Now())
	q.mu.Lock()
	q.deadlines.remove(a)
	if a.wc.running = false; a.wc.shutdowns > 0 {
		q.down.inside-- // see shutdownCallLocked
		q.notifyLocked()
	}
	s := &q.s
	// Found by key (slots move when the store shrinks); ours if it has our gen.
	i, pos, _ := s.index.find(&s.slab, key)
	var e *entry[K]
	if i >= 0 {
		e = s.at(i)
	}
	ra := retryAtOf(err)
	switch {
	case e == nil || e.state != stateRunning || e.gen != a.gen:
		// Withdrawn while it ran: a newer schedule of the key is left alone,
		// but released if it waited for this attempt.
		delete(q.withdrawn, key)
		if e != nil && e.state == stateBlocked {
			s.push(i)
		}
		if err != nil && ra == nil {
			log = func() { q.log.V(2).Info("Withdrawn work failed; not retried", "key", key, "err", err) }
		}
	case err == nil:
		s.remove(i, pos)
	case ra != nil && q.down.closed:
		s.remove(i, pos)
		d.drops++
		log = func() { q.log.V(2).Info("Deferred work dropped at shutdown", "key", key) }
	case ra != nil:
		// Not a failure: no attempt is counted and no hook is called.
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
		log = func() { q.log.V(4).Info("Work deferred", "key", key, "until", ra.at, "reason", ra.reason) }
	default:
		if e.attempts < math.MaxInt32 { // unlimited attempts count up to here
			e.attempts++
		}
		attempts := int(e.attempts)
		if !q.down.closed && !IsPermanent(err) && !q.retry.exhausted(attempts) {
			wait := q.retry.backoff(attempts)
			e.next = now.add(wait)
			s.push(i)
			d.pending++
			d.retries++
			d.backoff++
			if f := q.hooks.retry; f != nil {
				w := q.s.snapshot(e)
				hook = func() { f(w, err) }
			}
			log = func() {
				q.log.V(4).Info("Work failed; will retry", "key", key, "attempts", attempts, "backoff", wait, "err", err)
			}
		} else {
			if f := q.hooks.failure; f != nil {
				w := q.s.snapshot(e)
				w.Running = false
				hook = func() { f(w, err) }
			}
			s.remove(i, pos)
			d.failures++
			log = func() {
				q.log.Error(err, "Work failed; giving up", "key", key, "attempts", attempts, "permanent", IsPermanent(err))
			}
		}
	}
	s.shrink() // no slot number is used below
	if hook != nil {
		q.down.hooking++
		q.notifyLocked() // Shutdown does not wait for a worker in a hook
		q.pumpLocked(&d) // arm the timer for a retry before the hook runs
	} else {
		next = q.nextLocked(&d, now, a)
	}
	q.mu.Unlock()
	q.m.apply(d)
	return next, log, hook
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

// nextLocked returns a finished worker's next due attempt, or frees its slot.
func (q *TimedWorkerQueue[K]) nextLocked(d *delta, now moment, a *attempt[K]) *attempt[K] {
	if a = q.takeDueLocked(now, a, d); a == nil {
		q.active--
		d.running--
		q.notifyLocked()
	}
	q.pumpLocked(d)
	return a
}

// callHook calls hook, recovering a panic.
func (q *TimedWorkerQueue[K]) callHook(key K, hook func()) {
	defer func() {
		if r := recover(); r != nil {
			q.log.Error(fmt.Errorf("%v", r), "Hook panicked", "key", key, "stack", string(debug.Stack()))
		}
	}()
	hook()
}
