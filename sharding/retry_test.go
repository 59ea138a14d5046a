package sharding_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/taintkit/taintkit/sharding"
)

func TestRetryPolicyBackoff(t *testing.T) {
	var zero sharding.RetryPolicy
	assert.Equal(t, time.Second, zero.Backoff(0), "n below 1 counts as 1")
	assert.Equal(t, time.Second, zero.Backoff(1))
	assert.Equal(t, 4*time.Second, zero.Backoff(3))
	assert.Equal(t, time.Minute, zero.Backoff(40), "capped at the default MaxBackoff, without overflow")
	p := sharding.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}
	assert.Equal(t, []time.Duration{1e9, 2e9, 4e9, 8e9, 10e9, 10e9},
		[]time.Duration{p.Backoff(1), p.Backoff(2), p.Backoff(3), p.Backoff(4), p.Backoff(5), p.Backoff(6)})
	huge := sharding.RetryPolicy{InitialBackoff: time.Hour, MaxBackoff: 1<<63 - 1}
	assert.Equal(t, time.Duration(1<<63-1), huge.Backoff(200), "must cap, not overflow")
	// One backoff set alone wins over the other's default.
	onlyMax := sharding.RetryPolicy{MaxBackoff: 100 * time.Millisecond}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond},
		[]time.Duration{onlyMax.Backoff(1), onlyMax.Backoff(4)}, "a MaxBackoff alone below a second: every wait")
	onlyInitial := sharding.RetryPolicy{InitialBackoff: 2 * time.Hour}
	assert.Equal(t, []time.Duration{2 * time.Hour, 2 * time.Hour},
		[]time.Duration{onlyInitial.Backoff(1), onlyInitial.Backoff(4)}, "an InitialBackoff alone above a minute: every wait")
	bad := sharding.RetryPolicy{InitialBackoff: -time.Second}
	assert.Equal(t, zero.Backoff(2), bad.Backoff(2), "an invalid policy waits as the default")
}
