package backoff_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/taintkit/taintkit/internal/backoff"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		p    backoff.Policy
		want string // "" for valid
	}{
		{"zero", backoff.Policy{}, ""},
		{"both set", backoff.Policy{MaxAttempts: 1, InitialBackoff: time.Second, MaxBackoff: time.Second}, ""},
		// One backoff alone is valid whatever its value: the other's default gives way.
		{"max alone, tiny", backoff.Policy{MaxBackoff: time.Nanosecond}, ""},
		{"initial alone, huge", backoff.Policy{InitialBackoff: 24 * time.Hour}, ""},
		{"unlimited attempts", backoff.Policy{MaxAttempts: backoff.UnlimitedAttempts}, ""},
		{"negative attempts", backoff.Policy{MaxAttempts: -2}, "pkg: P.MaxAttempts must not be negative but for UnlimitedAttempts (-1), got -2"},
		{"negative initial", backoff.Policy{InitialBackoff: -time.Second}, "pkg: P.InitialBackoff must not be negative, got -1s"},
		{"negative max", backoff.Policy{MaxBackoff: -time.Second}, "pkg: P.MaxBackoff must not be negative, got -1s"},
		{"max below initial", backoff.Policy{InitialBackoff: 2 * time.Second, MaxBackoff: time.Second},
			"pkg: P.MaxBackoff (1s) must not be less than P.InitialBackoff (2s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check("pkg", "P")
			if tc.want == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.want)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name   string
		p      backoff.Policy
		want   backoff.Policy
		reason string
	}{
		{"zero", backoff.Policy{},
			backoff.Policy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute}, "the defaults"},
		{"unlimited stays", backoff.Policy{MaxAttempts: backoff.UnlimitedAttempts},
			backoff.Policy{MaxAttempts: backoff.UnlimitedAttempts, InitialBackoff: time.Second, MaxBackoff: time.Minute}, ""},
		{"set fields stay", backoff.Policy{MaxAttempts: 1, InitialBackoff: 2 * time.Second, MaxBackoff: 3 * time.Second},
			backoff.Policy{MaxAttempts: 1, InitialBackoff: 2 * time.Second, MaxBackoff: 3 * time.Second}, ""},
		{"max alone below the default initial", backoff.Policy{MaxBackoff: 100 * time.Millisecond},
			backoff.Policy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
			"every wait is MaxBackoff"},
		{"max alone above the default initial", backoff.Policy{MaxBackoff: 5 * time.Second},
			backoff.Policy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 5 * time.Second}, ""},
		{"initial alone above the default max", backoff.Policy{InitialBackoff: 2 * time.Hour},
			backoff.Policy{MaxAttempts: 5, InitialBackoff: 2 * time.Hour, MaxBackoff: 2 * time.Hour},
			"every wait is InitialBackoff"},
		{"initial alone below the default max", backoff.Policy{InitialBackoff: 10 * time.Second},
			backoff.Policy{MaxAttempts: 5, InitialBackoff: 10 * time.Second, MaxBackoff: time.Minute}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.WithDefaults(), tc.reason)
		})
	}
}

func TestWait(t *testing.T) {
	p := backoff.Policy{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}.WithDefaults()
	var got []time.Duration
	for n := 0; n <= 6; n++ {
		got = append(got, p.Wait(n))
	}
	assert.Equal(t, []time.Duration{1e9, 1e9, 2e9, 4e9, 8e9, 10e9, 10e9}, got, "n below 1 counts as 1")

	huge := backoff.Policy{InitialBackoff: time.Hour, MaxBackoff: math.MaxInt64}.WithDefaults()
	assert.Equal(t, time.Duration(math.MaxInt64), huge.Wait(200), "must cap, not overflow")
	tiny := backoff.Policy{InitialBackoff: 1, MaxBackoff: 1 << 62}.WithDefaults()
	assert.Equal(t, time.Duration(1<<62), tiny.Wait(200), "must cap, not overflow")
	assert.Equal(t, time.Duration(1<<62), tiny.Wait(math.MaxInt), "must cap, not overflow")
}

func TestBackoff(t *testing.T) {
	var zero backoff.Policy
	assert.Equal(t, time.Second, zero.Backoff(1))
	assert.Equal(t, 4*time.Second, zero.Backoff(3))
	assert.Equal(t, time.Minute, zero.Backoff(40))
	for _, bad := range []backoff.Policy{
		{MaxAttempts: -2, InitialBackoff: time.Hour},
		{InitialBackoff: -time.Second},
		{InitialBackoff: time.Hour, MaxBackoff: time.Second},
	} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			for n := 1; n <= 8; n++ {
				assert.Equal(t, zero.Backoff(n), bad.Backoff(n), "an invalid policy waits as the default; n=%d", n)
			}
		})
	}
}

func TestExhausted(t *testing.T) {
	three := backoff.Policy{MaxAttempts: 3}.WithDefaults()
	assert.False(t, three.Exhausted(2))
	assert.True(t, three.Exhausted(3), "the third failure was the last attempt")
	unlimited := backoff.Policy{MaxAttempts: backoff.UnlimitedAttempts}.WithDefaults()
	for _, failed := range []int{1, 5, 1 << 31, math.MaxInt} {
		assert.False(t, unlimited.Exhausted(failed), "after %d failures", failed)
	}
	assert.Equal(t, time.Minute, unlimited.Wait(math.MaxInt), "the wait after any number of failures is capped")
}
