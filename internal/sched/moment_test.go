package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestMoment(t *testing.T) {
	times := []time.Time{
		time.Unix(-1<<63, 0), // the first second time.Unix can give
		{},
		time.Date(1500, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Unix(0, 0),
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(1<<63-1-unixToInternal, 999_999_999), // the last time.Time
	}
	for i, a := range times {
		m := MomentOf(a)
		assert.True(t, m.Time(time.UTC).Equal(a), "round trip of %v", a)
		assert.True(t, m.Before(Never))
		for j, b := range times {
			assert.Equal(t, i < j, m.Before(MomentOf(b)), "%v before %v", a, b)
			assert.Equal(t, a.Before(b), m.Before(MomentOf(b)), "%v before %v, as time orders them", a, b)
		}
	}
	m := MomentOf(time.Date(2025, 1, 1, 0, 0, 0, 999_999_999, time.UTC))
	assert.Equal(t, MomentOf(time.Date(2025, 1, 1, 0, 0, 2, 0, time.UTC)), m.Add(time.Second+1))
	assert.Equal(t, Never, MomentOf(times[len(times)-1]).Add(time.Second))
	assert.Equal(t, time.Second+1, m.Until(m.Add(time.Second+1)))
	assert.Equal(t, time.Duration(0), m.Until(m))
	assert.Equal(t, time.Duration(1<<63-1), MomentOf(times[1]).Until(MomentOf(times[6])), "too long for a Duration")
	assert.Equal(t, time.Duration(1<<63-1), MomentOf(times[0]).Until(MomentOf(times[8])), "overflowing")
	assert.Equal(t, -1.5, m.SecondsSince(m.Add(1500*time.Millisecond)))
}
