package sharding

import (
	"context"
	"math"
	"time"

	"k8s.io/utils/clock"
)

// scheduleRetry puts e in lane's retry heap and wakes the retry loop if e is
// now the earliest retry of the lane.
func scheduleRetry[H, L, T comparable](d *Dispatcher[H, L], lane *dispatcherLane[H, L, T], e retryEntry[T]) {
	d.retryMu.Lock()
	d.retrySeq++
	e.seq = d.retrySeq
	lane.heap.push(e)
	first := lane.heap[0].seq == e.seq
	if n := dueNanos(e.due); n < d.dueHint.Load() {
		d.dueHint.Store(n)
	}
	d.retryMu.Unlock()
	if first {
		select {
		case d.retryWake <- struct{}{}:
		default:
		}
	}
}

// maxRearms bounds how many times in a row the retry loop re-arms its timer
// because the clock moved between reading Now and NewTimer. A FakeClock
// moves only when stepped, so one re-arm makes the timer exact after a
// racing Step; a real clock always moves a little, and a timer late by the
// nanoseconds of the last try is accepted.
const maxRearms = 2

// retryLoop is the one goroutine that owns the one live retry timer. It
// queues due retries and sleeps until the earliest of the rest, a new
// earliest retry, or ctx is done.
func (d *Dispatcher[H, L]) retryLoop(ctx context.Context) {
	var (
		timer  clock.Timer
		done   = ctx.Done()
		stopTm = func() {
			if timer != nil {
				// A fresh timer per wait, rather than Reset, so that a
				// value left in the old channel never matters (a
				// FakeClock does not drain on Reset).
				timer.Stop()
				timer = nil
			}
		}
	)
	defer stopTm()
	rearms := 0
	for {
		stopTm()
		// Re-read the time after every wake-up: a Step may have raced
		// with the previous wait.
		now := d.clock.Now()
		next, ok := d.promoteDue(now)

		var fire <-chan time.Time
		if ok {
			timer = d.clock.NewTimer(next.Sub(now))
			fire = timer.C()
			// The timer fires next.Sub(now) after the clock's time at
			// NewTimer: if the clock moved since now, it would fire late.
			now2 := d.clock.Now()
			if !now2.Before(next) {
				continue // already due: queue it
			}
			if !now2.Equal(now) && rearms < maxRearms {
				rearms++
				continue // the clock moved while arming: re-arm from now2
			}
		}
		rearms = 0
		select {
		case <-done:
			return
		case <-d.retryWake:
		case <-fire:
		}
	}
}

// earliest returns the earliest due time in a or b, if any.
func earliest[H, L any](a retryHeap[H], b retryHeap[L]) (time.Time, bool) {
	switch {
	case len(a) == 0 && len(b) == 0:
		return time.Time{}, false
	case len(a) == 0:
		return b[0].due, true
	case len(b) == 0 || a[0].due.Before(b[0].due):
		return a[0].due, true
	}
	return b[0].due, true
}

// noRetry is dueHint when no retry waits.
const noRetry = math.MaxInt64

// The range of times dueNanos maps exactly.
var (
	minDueNanos = time.Unix(0, math.MinInt64)
	maxDueNanos = time.Unix(0, math.MaxInt64-1)
)

// dueNanos returns t as nanoseconds since the Unix epoch, saturated to
// [math.MinInt64, math.MaxInt64-1] outside the years 1678–2262 that int64
// nanoseconds span, so it never overflows, never returns noRetry, and keeps
// order: a before b implies dueNanos(a) <= dueNanos(b).
func dueNanos(t time.Time) int64 {
	switch {
	case t.Before(minDueNanos):
		return math.MinInt64
	case t.After(maxDueNanos):
		return math.MaxInt64 - 1
	}
	return t.UnixNano()
}

// promoteIfDue queues the retries due now, if dueHint says some may be. When
// none is due it costs one atomic load, plus a clock read while retries wait.
func (d *Dispatcher[H, L]) promoteIfDue() {
	hint := d.dueHint.Load()
	if hint == noRetry {
		return
	}
	if now := d.clock.Now(); hint <= dueNanos(now) {
		d.promoteDue(now)
	}
}

// promoteDue queues every retry due at or before now that is not stale, at
// the back of its lane, and returns the earliest due time left, if any. It
// holds retryMu throughout, so that no worker picks while a due retry is out
// of both its heap and its lane.
func (d *Dispatcher[H, L]) promoteDue(now time.Time) (time.Time, bool) {
	d.retryMu.Lock()
	nh := promote(d, &d.high, now)
	nl := promote(d, &d.low, now)
	next, ok := earliest(d.high.heap, d.low.heap)
	hint := int64(noRetry)
	if ok {
		hint = dueNanos(next)
	}
	d.dueHint.Store(hint)
	d.retryMu.Unlock()
	for range nh {
		d.high.m.backoff.Dec()
		d.high.m.depth.Inc()
	}
	for range nl {
		d.low.m.backoff.Dec()
		d.low.m.depth.Inc()
	}
	return next, ok
}

// promote pops the entries of lane's heap due at or before now and queues the
// items that still wait for them; it returns how many it queued. retryMu must
// be held.
func promote[H, L, T comparable](d *Dispatcher[H, L], lane *dispatcherLane[H, L, T], now time.Time) int {
	n := 0
	for len(lane.heap) > 0 && !lane.heap[0].due.After(now) {
		e := lane.heap.pop()
		s := d.shards[e.shard]
		s.mu.Lock()
		ok := !s.closed && lane.of(s).retryDue(e.item, e.gen)
		s.mu.Unlock()
		if ok {
			n++
			s.signal()
		}
	}
	return n
}
