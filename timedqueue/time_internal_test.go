package timedqueue

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestUnixNanoSaturates(t *testing.T) {
	assert.Equal(t, int64(never), unixNano(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)))
	assert.Equal(t, int64(math.MinInt64), unixNano(time.Time{}))
	assert.Equal(t, int64(1500), unixNano(time.Unix(1, 500).Add(-time.Second+1000)))
	for _, tm := range []time.Time{
		time.Unix(0, math.MaxInt64), time.Unix(0, math.MinInt64), // the very edges are saturated
		time.Unix(0, math.MaxInt64-1), time.Unix(0, math.MinInt64+1),
	} {
		assert.True(t, saturated(unixNano(tm)) || unixNano(tm) == tm.UnixNano(), "%v", tm)
	}
	assert.False(t, saturated(unixNano(time.Unix(0, math.MaxInt64-int64(2*time.Second)))))
}

func TestInstant(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(1500, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Unix(0, 0),
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i, a := range times {
		ia := instantOf(a)
		assert.True(t, ia.time(time.UTC).Equal(a), "round trip of %v", a)
		if ns := ia.ns(); !saturated(ns) {
			assert.Equal(t, ia, instantOfNs(ns), "from ns: %v", a)
		}
		assert.True(t, ia.before(neverInstant))
		for j, b := range times {
			assert.Equal(t, i < j, ia.before(instantOf(b)), "%v before %v", a, b)
		}
	}
	t0 := instantOf(time.Date(2025, 1, 1, 0, 0, 0, 999_999_999, time.UTC))
	assert.Equal(t, instantOf(time.Date(2025, 1, 1, 0, 0, 2, 0, time.UTC)), t0.add(time.Second+1))
	assert.Equal(t, neverInstant, instant{sec: never - 1}.add(time.Second))
	assert.Equal(t, time.Second+1, t0.until(t0.add(time.Second+1)))
	assert.Equal(t, time.Duration(0), t0.until(t0))
	assert.Equal(t, time.Duration(math.MaxInt64), instantOf(times[0]).until(instantOf(times[5])), "too long for a Duration")
	assert.Equal(t, time.Duration(math.MaxInt64), instant{sec: math.MinInt64 + 1}.until(instant{sec: never - 1}), "overflowing")
	assert.Equal(t, -1.5, t0.secondsSince(t0.add(1500*time.Millisecond)))
}
