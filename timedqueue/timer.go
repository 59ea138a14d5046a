package timedqueue

import (
	"context"

	"github.com/taintkit/taintkit/internal/sched"
)

// alarm is a queue's one timer and the state of its goroutine, guarded by
// the queue's mutex.
type alarm struct {
	sched.Alarm
	running bool          // the timer goroutine runs; true whenever the alarm is armed
	stop    chan struct{} // closed by Shutdown: the timer goroutine exits
	idle    chan struct{} // a token: the timer was stopped, the goroutine may exit
}

// armedFor returns the moment the alarm is armed for, or never.
func (a *alarm) armedFor() moment { return moment(a.At()) }

// pumpLocked brings the queue up to date with its clock: it expires timed-out
// attempts, starts due schedules while slots are free, and arms the timer.
// Every method that may change the earliest event calls it before returning.
func (q *TimedWorkerQueue[K]) pumpLocked(d *delta) {
	// No clock read if every slot is busy (a finishing worker pumps), or the
	// timer is armed for the earliest schedule (if that time has passed, its
	// goroutine pumps), or stopped with none.
	if q.timeout <= 0 && !q.down.closed {
		if n, ok := q.s.head(); q.active >= q.max || ok && n.at == q.alarm.armedFor() || !ok && q.alarm.armedFor() == never {
			return
		}
	}
	for tries := 0; ; tries++ {
		now := momentOf(q.clock.Now())
		if q.timeout > 0 && !now.before(q.deadlines.min) {
			for a := range q.deadlines.timed {
				if !now.before(a.deadline) {
					a.cancel(context.DeadlineExceeded)
					q.deadlines.remove(a)
				}
			}
		}
		// Start due schedules while slots are free, each on a new worker.
		for q.active < q.max {
			a := q.takeDueLocked(now, nil, d)
			if a == nil {
				break
			}
			q.active++
			d.running++
			go q.worker(a)
		}
		want := q.deadlines.min
		// A due head remains only if every slot is busy: a finishing worker takes it.
		if n, ok := q.s.head(); ok && now.before(n.at) && n.at.before(want) {
			want = n.at
		}
		if q.down.closed || want == never {
			// Nothing to wait for: stop the timer and tell a running timer
			// goroutine to exit (a token left over wakes a later one once).
			q.alarm.Disarm()
			if q.alarm.running {
				select {
				case q.alarm.idle <- struct{}{}:
				default:
				}
			}
			return
		}
		if want == q.alarm.armedFor() {
			return
		}
		// From a fresh reading (starting work took time); a delay past a
		// Duration's range fires early, and the pump re-arms.
		armedAt, now2 := q.alarm.Arm(q.clock, sched.Moment(want))
		if !q.alarm.running {
			q.alarm.running = true
			go q.timerLoop()
		}
		// If a Step moved the clock while it armed, the timer fires that
		// much late, or, past want, never on a FakeClock. So go round
		// again, twice at most.
		if moment(now2).before(want) && (now2 == armedAt || tries >= 2) {
			return
		}
		q.alarm.Disarm() // else want == the alarm's time would end the next round early
	}
}

// timerLoop is the queue's timer goroutine: it pumps when the timer fires.
// pumpLocked starts it when it arms the timer; it exits, under q.mu, when the
// timer is stopped or the queue shut down: no armed timer lacks a receiver.
func (q *TimedWorkerQueue[K]) timerLoop() {
	for {
		fired := false
		select {
		case <-q.alarm.C():
			fired = true
		case <-q.alarm.idle: // the timer was stopped; it may have been re-armed since
		case <-q.alarm.stop:
		}
		var d delta
		q.mu.Lock()
		if fired {
			// A re-arming since the fire may have fired too: drain it, or a
			// FakeClock would block in Step on the stale value.
			q.alarm.Disarm()
			q.pumpLocked(&d)
		}
		exit := q.alarm.armedFor() == never || q.down.closed
		if exit {
			q.alarm.running = false
			q.notifyLocked()
		}
		q.mu.Unlock()
		q.m.apply(d)
		if exit {
			return
		}
	}
}

// deadlines are the attempts in flight with a timeout, guarded by q.mu.
type deadlines[K comparable] struct {
	timed map[*attempt[K]]struct{}
	min   moment // the earliest deadline over timed, or never
}

// remove removes a, if there, and recomputes the earliest deadline.
func (ds *deadlines[K]) remove(a *attempt[K]) {
	delete(ds.timed, a)
	if a.deadline == ds.min {
		ds.min = never
		for b := range ds.timed {
			if b.deadline.before(ds.min) {
				ds.min = b.deadline
			}
		}
	}
}
