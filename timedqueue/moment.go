package timedqueue

import (
	"time"

	"github.com/taintkit/taintkit/internal/sched"
)

// A moment is a [sched.Moment]: the instant of a time.Time in 12 bytes,
// ordered as times are. This package's code reads it through the methods
// below, which add nothing to sched's.
type moment sched.Moment

// never is after every time.Time.
var never = moment(sched.Never)

func momentOf(t time.Time) moment { return moment(sched.MomentOf(t)) }

// time returns m in loc.
func (m moment) time(loc *time.Location) time.Time { return sched.Moment(m).Time(loc) }

func (m moment) before(o moment) bool { return sched.Moment(m).Before(sched.Moment(o)) }

// add returns m+d for d ≥ 0, or never if that is past every time.Time.
func (m moment) add(d time.Duration) moment { return moment(sched.Moment(m).Add(d)) }

// secondsSince returns m−o in seconds, never overflowing.
func (m moment) secondsSince(o moment) float64 {
	return sched.Moment(m).SecondsSince(sched.Moment(o))
}
