package main

import (
	"time"

	"k8s.io/utils/clock"
)

// scaledClock is a real clock that runs 1/scale times as fast as the wall
// clock from start on: with scale 0.01, a 300 s toleration runs out after 3
// wall-clock seconds. It lets -real play the scenario on real timers without
// rewriting any duration in it.
type scaledClock struct {
	start time.Time // the clock's time at wallStart
	wall  time.Time // when it was created, on the wall clock
	scale float64
}

var _ clock.Clock = (*scaledClock)(nil)

func newScaledClock(start time.Time, scale float64) *scaledClock {
	return &scaledClock{start: start, wall: time.Now(), scale: scale}
}

func (c *scaledClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.wall)) / c.scale))
}

func (c *scaledClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// real converts a duration on this clock to wall-clock time.
func (c *scaledClock) real(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.scale)
}

func (c *scaledClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

func (c *scaledClock) NewTimer(d time.Duration) clock.Timer {
	return &scaledTimer{c: c, t: time.NewTimer(c.real(d))}
}

func (c *scaledClock) Sleep(d time.Duration) { time.Sleep(c.real(d)) }

func (c *scaledClock) Tick(d time.Duration) <-chan time.Time { return time.Tick(c.real(d)) }

type scaledTimer struct {
	c *scaledClock
	t *time.Timer
}

func (t *scaledTimer) C() <-chan time.Time        { return t.t.C }
func (t *scaledTimer) Stop() bool                 { return t.t.Stop() }
func (t *scaledTimer) Reset(d time.Duration) bool { return t.t.Reset(t.c.real(d)) }
