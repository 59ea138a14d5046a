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
	seq      uint64                  // the schedule's seq: if the key's entry no longer has it, the schedule was withdrawn
	first    bool                    // first attempt of its schedule: lateness is observed
	late     float64                 // start − FireAt, seconds
	wc       *workCtx[K]             // this attempt's identity
	ctx      context.Context         // the work func's ctx: wc, or a timedCtx around it
	cancel   context.CancelCauseFunc // nil without an attempt timeout
	deadline instant                 // with an attempt timeout
	tpos     int                     // index in q.timed, -1 if not there
	ticket   uint64                  // the admit func's turn, 0 if none was set when it began
	admit    AdmitFunc[K]            // with ticket
	fireAt   time.Time               // with ticket: the schedule's, for admit
}

// outcome is what the end of an attempt needs to report once the lock is released.
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

// pumpLocked brings the queue up to date with its clock: it expires timed-out
// attempts, starts due schedules while slots are free, and arms the timer for
// the next event. Every method that may change the earliest event calls it
// before returning, so no change waits for the timer goroutine.
func (q *TimedWorkerQueue[K]) pumpLocked(d *delta) {
	// Fast path, no clock read: the timer is armed for the earliest schedule
	// (or stopped with nothing to wait for), so nothing is due that the timer
	// goroutine will not see. If that time has already passed, the timer has
	// fired and its goroutine brings the queue up to date.
	if q.timeout <= 0 && !q.closed {
		if q.active >= q.max {
			// Every slot is busy: nothing can start, and a worker that
			// finishes pumps again before it gives its slot up. The timer may
			// stay armed for a time that no longer matters; if it fires, the
			// timer goroutine just pumps.
			return
		}
		switch n, far, ok := q.s.peek(); {
		case !ok:
			if q.armedAt == never {
				return
			}
		case far: // the far heap's times saturate: compare them in full
			if q.armedAt != never && q.s.first(n, far) == q.armedFor {
				return
			}
		case n.at == q.armedAt:
			return
		}
	}
	for tries := 0; ; tries++ {
		now := q.read()
		if q.timeout > 0 && !now.at.before(q.minDeadline) {
			q.expireLocked(now)
		}
		q.startDueLocked(now, d)
		want := q.wakeAtLocked(now)
		if want == neverInstant {
			// Nothing to wait for: stop the timer and let its goroutine
			// exit. This holds even when the timer is already stopped: a
			// previous round of this loop may have stopped it after starting
			// the goroutine, and nothing else would tell the goroutine.
			q.stopTimerLocked()
			q.idleLocked()
			return
		}
		if q.armedAt != never && want == q.armedFor {
			return
		}
		q.stopTimerLocked()
		// A delay too long for a Duration fires early; the pump then re-arms.
		if q.realClock {
			// Starting the due work took time: count from a fresh reading,
			// so that the timer does not fire late by as much.
			now = q.read()
		}
		q.timer.Reset(now.at.until(want))
		q.armedFor = want
		if q.armedAt = want.ns(); q.armedAt == never {
			q.armedAt = math.MinInt64 // armed: matches no main-heap time, as a far time must not
		}
		if !q.timerOn {
			q.timerOn = true
			go q.timerLoop()
		}
		// The timer was armed relative to the clock's time at Reset, which may
		// be later than now: another goroutine may step a FakeClock (or a real
		// clock moves) in between. If the clock moved past want, a FakeClock
		// will not fire the timer; if it moved at all, the timer fires late by
		// as much. Either way go round again, from a fresh reading. A real
		// clock always moves a little, so its late arming (by the time Reset
		// takes) is accepted after a few tries.
		if q.realClock {
			return // no one steps it; the late arming costs the time Reset takes
		}
		now2 := q.read()
		if now2.at.before(want) && (now2.at == now.at || tries >= 2) {
			return
		}
		q.stopTimerLocked() // else want == armedAt would end the next round early
	}
}

// idleLocked tells a running timer goroutine that the timer is not armed, so
// that it exits. A token left over wakes a later goroutine once, harmlessly.
func (q *TimedWorkerQueue[K]) idleLocked() {
	if !q.timerOn {
		return
	}
	select {
	case q.idle <- struct{}{}:
	default:
	}
}

// wakeAtLocked returns when the timer must fire next, or neverInstant.
func (q *TimedWorkerQueue[K]) wakeAtLocked(now reading) instant {
	if q.closed {
		return neverInstant // running work was cancelled; nothing else will start
	}
	want := q.minDeadline
	// A due head only remains when every slot is busy: a worker that finishes
	// takes it, no timer is needed. A stale head is never waited for: peek
	// drops it.
	if n, far, ok := q.s.peek(); ok && !q.s.due(n, far, now) {
		if at := q.s.first(n, far); at.before(want) {
			want = at
		}
	}
	return want
}

// stopTimerLocked stops the timer and drains a value it may have sent.
func (q *TimedWorkerQueue[K]) stopTimerLocked() {
	if q.armedAt == never {
		return
	}
	if !q.timer.Stop() {
		select {
		case <-q.timerC:
		default:
		}
	}
	q.armedAt = never
}

// startDueLocked starts due schedules, in (NextAttempt, seq) order, while
// concurrency slots are free, each on a new worker goroutine.
func (q *TimedWorkerQueue[K]) startDueLocked(now reading, d *delta) {
	for !q.closed && q.active < q.max {
		n, far, ok := q.s.peek()
		if !ok || !q.s.due(n, far, now) {
			return
		}
		a := q.beginLocked(q.s.pop(far), now, nil, d)
		q.active++
		d.running++
		d.pending--
		go q.worker(a)
	}
}

// beginLocked marks slot i, just taken from the heap, running and returns its
// attempt: a, reused, or a new one if a is nil.
func (q *TimedWorkerQueue[K]) beginLocked(i int32, now reading, a *attempt[K], d *delta) *attempt[K] {
	e := q.s.at(i)
	if e.attempts > 0 {
		d.backoff-- // it was backing off
	}
	e.state = stateRunning
	if a == nil {
		a = new(attempt[K])
	}
	*a = attempt[K]{key: e.key, seq: e.seq, first: e.attempts == 0 && !e.deferred, tpos: -1}
	if a.first {
		a.late = now.at.secondsSince(q.s.fireInstant(i))
	}
	if admit := q.hooks.Load().admit; admit != nil {
		q.tickets++
		a.ticket, a.admit, a.fireAt = q.tickets, admit, q.s.fireAt(i)
	}
	// Each attempt gets a ctx of its own, even without a timeout: it tells
	// Shutdown which attempt its caller belongs to (see workCtx).
	a.wc = q.newWorkCtxLocked()
	a.ctx = a.wc
	if q.timeout <= 0 {
		return a
	}
	cctx, cancel := context.WithCancelCause(q.baseCtx)
	a.cancel = cancel
	a.deadline = now.at.add(q.timeout)
	a.wc.Context = cctx
	a.ctx = &timedCtx[K]{workCtx: a.wc, deadline: a.deadline}
	a.tpos = len(q.timed)
	q.timed = append(q.timed, a)
	if a.deadline.before(q.minDeadline) {
		q.minDeadline = a.deadline
	}
	return a
}

// expireLocked cancels the attempts whose deadline has passed.
func (q *TimedWorkerQueue[K]) expireLocked(now reading) {
	for i := 0; i < len(q.timed); {
		if a := q.timed[i]; !now.at.before(a.deadline) {
			a.cancel(context.DeadlineExceeded)
			q.untimeLocked(a) // moves the last one to i
			continue
		}
		i++
	}
}

// untimeLocked removes a from q.timed and recomputes the earliest deadline.
func (q *TimedWorkerQueue[K]) untimeLocked(a *attempt[K]) {
	if a.tpos < 0 {
		return
	}
	last := len(q.timed) - 1
	q.timed[a.tpos] = q.timed[last]
	q.timed[a.tpos].tpos = a.tpos
	q.timed[last] = nil
	q.timed = q.timed[:last]
	a.tpos = -1
	if a.deadline == q.minDeadline {
		q.minDeadline = neverInstant
		for _, b := range q.timed {
			if b.deadline.before(q.minDeadline) {
				q.minDeadline = b.deadline
			}
		}
	}
}

// timerLoop is the queue's timer goroutine: it wakes when the timer fires and
// brings the queue up to date. pumpLocked starts it when it arms the timer and
// none runs; it exits when the timer is not armed (nothing to wait for) or when
// Shutdown closes q.stop. Both are decided under q.mu, as is the start, so the
// timer is never armed without a goroutine to receive from it.
func (q *TimedWorkerQueue[K]) timerLoop() {
	for {
		fired := false
		select {
		case <-q.timerC:
			fired = true
		case <-q.idle: // the timer was stopped; it may have been re-armed since
		case <-q.stop:
		}
		var d delta
		q.mu.Lock()
		if fired {
			// If the timer was re-armed between the fire and this lock, the
			// new arming may have fired too: stop and drain rather than just
			// forget it, so that no stale value waits in the channel while
			// the timer is armed again (a FakeClock would then block in Step).
			q.stopTimerLocked()
			q.pumpLocked(&d)
		}
		exit := q.armedAt == never || q.closed
		if exit {
			q.timerOn = false
			q.notifyLocked()
		}
		q.mu.Unlock()
		q.m.apply(d)
		if exit {
			return
		}
	}
}

// worker runs attempts until none is due, then exits. It starts with a.
func (q *TimedWorkerQueue[K]) worker(a *attempt[K]) {
	// If a work func calls runtime.Goexit, this goroutine ends in the middle
	// of the loop; the deferred func completes the bookkeeping and hands the
	// next attempt to a new goroutine. (A Goexit in a hook is handled by
	// hookThenRelease.)
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
// takes the next due attempt (reusing a). If the hook calls runtime.Goexit,
// the deferred func still releases the slot and hands the next attempt to a
// new goroutine.
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

// admitted asks a's admit func, in a's turn, whether a may start; if not, it
// returns when to ask again.
func (q *TimedWorkerQueue[K]) admitted(a *attempt[K]) (retryAt time.Time, ok bool) {
	q.turn.wait(a.ticket)
	defer q.turn.pass() // also if admit panics or calls runtime.Goexit
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

// settle records the end of attempt a with error err. It returns the next
// attempt this worker should run, unless o needs a hook (wait is true): then
// the worker keeps its slot until it has called the hook and
// [TimedWorkerQueue.release].
func (q *TimedWorkerQueue[K]) settle(a *attempt[K], err error, o *outcome[K]) (next *attempt[K], wait bool) {
	var d delta
	o.key = a.key
	h := q.hooks.Load()
	// Read outside the lock, to keep the critical section short: the 64
	// workers of a burst wake in cohorts and queue on the mutex. A reading
	// taken a little early is still a valid now: the retry time is counted
	// from the failure, and a due check that misses a step made meanwhile
	// leaves the item to the pump that follows the slot's release.
	now := q.read()
	q.mu.Lock()
	q.untimeLocked(a)
	q.returnedLocked(a.wc)
	s := q.s
	// The attempt finds its entry by key: slots move when the store shrinks.
	// The entry is this attempt's if it is running with the attempt's seq.
	i, pos, _ := s.idx.find(&s.slab, a.key)
	var e *entry[K]
	if i >= 0 {
		e = s.at(i)
	}
	ra := retryAtOf(err)
	switch {
	case e == nil || e.state != stateRunning || e.seq != a.seq:
		// Withdrawn: the schedule was cancelled while this attempt ran. Never
		// touch a newer schedule of the key, but release it if it waited
		// for this attempt.
		delete(q.withdrawn, a.key)
		if e != nil && e.state == stateBlocked {
			s.push(i)
		}
		if err != nil && ra == nil {
			o.kind, o.err = outcomeWithdrawnFailed, err
		}
	case err == nil:
		s.idx.deleteAt(pos)
		s.release(i)
	case ra != nil:
		// Not a failure: no attempt is counted and no hook is called.
		if q.closed {
			s.idx.deleteAt(pos)
			s.release(i)
			d.drops++
			o.kind, o.err = outcomeDeferDropped, err
			break
		}
		e.deferred = true
		at := instantOf(ra.at)
		if at.before(now.at) {
			at = now.at
		}
		s.setNext(i, at)
		s.push(i)
		d.pending++
		if e.attempts > 0 {
			d.backoff++
		}
		o.kind, o.err = outcomeDeferred, err
	default:
		e.attempts++
		if !q.closed && !IsPermanent(err) && int(e.attempts) < q.retry.MaxAttempts {
			o.kind, o.err = outcomeRetry, err
			o.wait = q.retry.backoff(int(e.attempts))
			s.setNext(i, now.at.add(o.wait))
			s.push(i)
			d.pending++
			d.retries++
			d.backoff++
			if o.hook = h.retry; o.hook != nil {
				o.w = q.snapshotLocked(i)
			} else {
				o.w.Attempts = int(e.attempts) // for the log
			}
		} else {
			o.kind, o.err, o.hook = outcomeFinal, err, h.failure
			o.w = q.snapshotLocked(i)
			o.w.Running = false
			s.idx.deleteAt(pos)
			s.release(i)
			d.failures++
		}
	}
	s.shrink() // no slot number is used below
	if o.hook != nil {
		q.hooking++
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
	q.hooking--
	next := q.nextLocked(&d, q.read(), a)
	q.mu.Unlock()
	q.m.apply(d)
	return next
}

// nextLocked returns the next due attempt for a worker that has just finished
// one, keeping its slot; or gives the slot up and returns nil.
func (q *TimedWorkerQueue[K]) nextLocked(d *delta, now reading, a *attempt[K]) *attempt[K] {
	if n, far, ok := q.s.peek(); !q.closed && ok && q.s.due(n, far, now) {
		a = q.beginLocked(q.s.pop(far), now, a, d)
		d.pending--
		q.pumpLocked(d)
		return a
	}
	q.active--
	d.running--
	q.notifyLocked()
	q.pumpLocked(d)
	return nil
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
