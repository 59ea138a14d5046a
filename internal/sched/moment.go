package sched

import (
	"math"
	"time"
)

// A Moment is the instant of a time.Time, without Location or monotonic
// reading: seconds since January 1, year 1 UTC, and nanoseconds. Every
// time.Time has one, and moments order as their times do. 32-bit fields make
// it 12 bytes with no padding; == compares two moments.
type Moment struct {
	secHi int32  // seconds, high half (signed)
	secLo uint32 // seconds, low half
	nsec  uint32 // [0, 1e9)
}

// Never is after every time.Time: no time has 1e9 nanoseconds.
var Never = Moment{secHi: math.MaxInt32, secLo: math.MaxUint32, nsec: 1e9}

// unixToInternal is time's offset from Unix seconds to seconds since year 1.
const unixToInternal = (1969*365 + 1969/4 - 1969/100 + 1969/400) * 86400

// MomentOf returns t's instant.
func MomentOf(t time.Time) Moment {
	// t.Unix() is t's seconds since year 1 minus unixToInternal, wrapping
	// on overflow: adding it back, wrapping too, recovers them exactly.
	return makeMoment(int64(uint64(t.Unix())+unixToInternal), uint32(t.Nanosecond()))
}

func makeMoment(sec int64, nsec uint32) Moment {
	return Moment{secHi: int32(sec >> 32), secLo: uint32(sec), nsec: nsec}
}

func (m Moment) sec() int64 { return int64(m.secHi)<<32 | int64(m.secLo) }

// Time returns m in loc.
func (m Moment) Time(loc *time.Location) time.Time {
	return time.Unix(int64(uint64(m.sec())-unixToInternal), int64(m.nsec)).In(loc)
}

// Before reports whether m is before o.
func (m Moment) Before(o Moment) bool {
	if m.secHi != o.secHi {
		return m.secHi < o.secHi
	}
	if m.secLo != o.secLo {
		return m.secLo < o.secLo
	}
	return m.nsec < o.nsec
}

// Add returns m+d for d ≥ 0, or Never if that is past every time.Time.
func (m Moment) Add(d time.Duration) Moment {
	if m == Never {
		return Never
	}
	sec, nsec := int64(d/time.Second), m.nsec+uint32(d%time.Second)
	if nsec >= 1e9 {
		sec, nsec = sec+1, nsec-1e9
	}
	if m.sec() > math.MaxInt64-sec {
		return Never
	}
	return makeMoment(m.sec()+sec, nsec)
}

// Until returns o−m: 0 if o is not after m, the largest Duration if the
// difference does not fit in one.
func (m Moment) Until(o Moment) time.Duration {
	if !m.Before(o) {
		return 0
	}
	s := uint64(o.sec()) - uint64(m.sec()) // exact: o is after m
	if s >= math.MaxInt64/uint64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s)*time.Second + time.Duration(int64(o.nsec)-int64(m.nsec))
}

// SecondsSince returns m−o in seconds, never overflowing.
func (m Moment) SecondsSince(o Moment) float64 {
	return float64(m.sec()) - float64(o.sec()) + (float64(m.nsec)-float64(o.nsec))/1e9
}
