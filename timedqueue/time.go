package timedqueue

import (
	"math"
	"time"
)

// Times are kept two ways. The heap orders schedules by Unix nanoseconds in an
// int64 (hnode.at), which is compact and fast but covers only the years
// 1678–2262: unixNano saturates outside, to math.MinInt64 or never. A
// schedule whose time saturates lives in the far heap instead (farheap.go),
// ordered by its instant: Unix seconds and nanoseconds, which hold every
// time.Time at full precision. Clock readings carry both forms.

// never is the heap time of a schedule after 2262 (saturated), the armed time
// of a stopped timer, and, as an instant, a time after every time.Time.
const never = math.MaxInt64

// Bounds of the Unix seconds whose nanoseconds fit in an int64.
const (
	minNanoSec = math.MinInt64/int64(time.Second) + 1
	maxNanoSec = math.MaxInt64/int64(time.Second) - 1
)

// unixNano returns t as Unix nanoseconds, saturated to math.MinInt64 or never
// outside 1678–2262 instead of overflowing. Saturated values are never the
// exact nanoseconds of a time: see saturated.
func unixNano(t time.Time) int64 { return instantOf(t).ns() }

// saturated reports whether ns, from unixNano or instant.ns, stands for a time
// outside the range of int64 nanoseconds.
func saturated(ns int64) bool { return ns == math.MinInt64 || ns == never }

// instant is a time as Unix seconds and nanoseconds in [0, 1e9): every
// time.Time fits, and instants order as their times do. Comparable with ==.
type instant struct {
	sec  int64
	nsec int32
}

// neverInstant is after every time.Time: time.Time's Unix seconds stay below
// math.MaxInt64.
var neverInstant = instant{sec: never}

func instantOf(t time.Time) instant { return instant{t.Unix(), int32(t.Nanosecond())} }

// instantOfNs returns the instant of unsaturated Unix nanoseconds.
func instantOfNs(ns int64) instant {
	sec, nsec := ns/int64(time.Second), ns%int64(time.Second)
	if nsec < 0 {
		sec, nsec = sec-1, nsec+int64(time.Second)
	}
	return instant{sec, int32(nsec)}
}

func (a instant) before(b instant) bool {
	return a.sec < b.sec || a.sec == b.sec && a.nsec < b.nsec
}

// time returns a as a time.Time in loc.
func (a instant) time(loc *time.Location) time.Time {
	return time.Unix(a.sec, int64(a.nsec)).In(loc)
}

// ns returns a as Unix nanoseconds, saturated as unixNano does.
func (a instant) ns() int64 {
	switch {
	case a.sec > maxNanoSec:
		return never
	case a.sec < minNanoSec:
		return math.MinInt64
	}
	return a.sec*int64(time.Second) + int64(a.nsec)
}

// add returns a+d for d ≥ 0, or neverInstant if that is beyond time.Time.
func (a instant) add(d time.Duration) instant {
	sec, nsec := int64(d/time.Second), a.nsec+int32(d%time.Second)
	if nsec >= int32(time.Second) {
		sec, nsec = sec+1, nsec-int32(time.Second)
	}
	if a.sec > never-1-sec {
		return neverInstant
	}
	return instant{a.sec + sec, nsec}
}

// until returns b−a, or 0 if b is not after a, or the largest Duration if the
// difference does not fit in one.
func (a instant) until(b instant) time.Duration {
	if !a.before(b) {
		return 0
	}
	if b.sec-a.sec > maxNanoSec || b.sec-a.sec < 0 { // too far, or overflowed
		return math.MaxInt64
	}
	return time.Duration((b.sec-a.sec)*int64(time.Second) + int64(b.nsec-a.nsec))
}

// secondsSince returns a−b in seconds, exact to the nanosecond for times less
// than 2⁵³ seconds from 1970, never overflowing.
func (a instant) secondsSince(b instant) float64 {
	return float64(a.sec) - float64(b.sec) + float64(a.nsec-b.nsec)/float64(time.Second)
}

// reading is one reading of the queue's clock, in both forms.
type reading struct {
	ns int64 // saturated, for the heap
	at instant
}

// read reads the queue's clock.
func (q *TimedWorkerQueue[K]) read() reading {
	at := instantOf(q.clock.Now())
	return reading{ns: at.ns(), at: at}
}
