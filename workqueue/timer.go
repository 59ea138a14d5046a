package workqueue

import (
	"time"

	"github.com/taintkit/taintkit/internal/sched"
)

// pumpLocked brings the queue up to date with its clock: it makes the
// waiting items that are due ready, updates the unfinished-work metrics
// when due, and arms the alarm for what comes next.
func (q *Queue[T]) pumpLocked(d *delta) {
	for tries := 0; ; tries++ {
		now := sched.MomentOf(q.clock.Now())
		ready := 0
		for {
			n, ok := q.s.head()
			if !ok || now.Before(n.At) {
				break
			}
			q.s.heap.RemoveTop()
			d.readied()
			ready += q.s.makeReady(n.Slot, n.At) // ready since its time
		}
		q.wakeLocked(ready)
		want := q.m.updateUnfinished(now, d)
		if n, ok := q.s.head(); ok && n.At.Before(want) {
			want = n.At
		}
		if q.down || want == sched.Never {
			q.alarm.Disarm()
			return
		}
		if want == q.alarm.At() {
			return
		}
		armedAt, now2 := q.alarm.Arm(q.clock, want)
		// If a Step moved the clock while it armed, the timer fires that
		// much late, or, past want, never on a FakeClock: go round again,
		// twice at most.
		if now2.Before(want) && (now2 == armedAt || tries >= 2) {
			return
		}
		q.alarm.Disarm() // else want == the alarm's time would end the next round early
	}
}

// rearmLocked pumps if what the alarm waits for has changed, with no clock
// read otherwise. If the alarm's time has passed, its goroutine pumps.
func (q *Queue[T]) rearmLocked(d *delta) {
	want := q.m.next
	if n, ok := q.s.head(); ok && n.At.Before(want) {
		want = n.At
	}
	if want != q.alarm.At() {
		q.pumpLocked(d)
	}
}

// timerLoop is the queue's timer goroutine, from New to ShutDown: it pumps
// when the alarm fires.
func (q *Queue[T]) timerLoop(fired <-chan time.Time) {
	defer close(q.stopped)
	for {
		select {
		case <-fired:
		case <-q.stop:
			return
		}
		var d delta
		q.mu.Lock()
		if !q.down {
			// A re-arming since the fire may have fired too: drain it, or a
			// FakeClock would block in Step on the stale value.
			q.alarm.Disarm()
			q.pumpLocked(&d)
		}
		q.mu.Unlock()
		q.m.apply(&d)
	}
}
