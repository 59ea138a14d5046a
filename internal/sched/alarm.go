package sched

import (
	"time"

	"k8s.io/utils/clock"
)

// An Alarm is a queue's one timer, armed for one Moment at a time or
// stopped. It is re-armed with Stop, a drain and Reset: a FakeClock does not
// drain on Reset, and a stale value would make a later Step block. Its
// owner guards it with a mutex and receives from C on a goroutine of its
// own; after a receive it calls Disarm before arming again.
type Alarm struct {
	timer clock.Timer
	c     <-chan time.Time
	at    Moment // when the timer fires; Never if it is stopped
}

// NewAlarm returns a stopped Alarm on c.
func NewAlarm(c clock.Clock) Alarm {
	t := c.NewTimer(time.Hour)
	t.Stop()
	return Alarm{timer: t, c: t.C(), at: Never}
}

// C is the channel the timer fires on.
func (a *Alarm) C() <-chan time.Time { return a.c }

// At returns the Moment the alarm is armed for, or Never if it is stopped.
func (a *Alarm) At() Moment { return a.at }

// Disarm stops the timer and drains a value it may have sent.
func (a *Alarm) Disarm() {
	if a.at == Never {
		return
	}
	if !a.timer.Stop() {
		select {
		case <-a.c:
		default:
		}
	}
	a.at = Never
}

// Arm disarms the alarm and sets it for want, counting from the clock's
// time at the Reset, armedAt, which it returns with the clock's time just
// after, now. A delay past a Duration's range fires early: the owner arms
// again. If now differs from armedAt, the clock moved while it armed (a
// FakeClock's Step): the timer then fires that much late, or, if now is at
// or past want, never on a FakeClock, so the owner reads the clock again
// and arms anew.
func (a *Alarm) Arm(c clock.Clock, want Moment) (armedAt, now Moment) {
	a.Disarm()
	armedAt = MomentOf(c.Now())
	a.timer.Reset(armedAt.Until(want))
	a.at = want
	return armedAt, MomentOf(c.Now())
}
