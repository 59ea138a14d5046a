package backoff_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/taintkit/taintkit/internal/backoff"
	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
)

// timedqueue.RetryPolicy and sharding.RetryPolicy are one concept in two
// packages: the same defaults and the same waits for the same fields.
func TestRetryPoliciesAgree(t *testing.T) {
	assert.Equal(t, backoff.DefaultMaxAttempts, timedqueue.DefaultMaxAttempts)
	assert.Equal(t, backoff.DefaultMaxAttempts, sharding.DefaultMaxAttempts)
	assert.Equal(t, backoff.DefaultInitialBackoff, timedqueue.DefaultInitialBackoff)
	assert.Equal(t, backoff.DefaultInitialBackoff, sharding.DefaultInitialBackoff)
	assert.Equal(t, backoff.DefaultMaxBackoff, timedqueue.DefaultMaxBackoff)
	assert.Equal(t, backoff.DefaultMaxBackoff, sharding.DefaultMaxBackoff)

	for _, p := range []backoff.Policy{
		{},
		{MaxBackoff: 100 * time.Millisecond},
		{InitialBackoff: 2 * time.Hour},
		{InitialBackoff: 300 * time.Millisecond, MaxBackoff: time.Second},
		{InitialBackoff: -time.Second},                         // invalid: the default waits
		{InitialBackoff: time.Minute, MaxBackoff: time.Second}, // invalid: the default waits
	} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			tq, sh := timedqueue.RetryPolicy(p), sharding.RetryPolicy(p)
			for n := 0; n <= 12; n++ {
				want := p.Backoff(n)
				assert.Equal(t, want, tq.Backoff(n), "timedqueue, n=%d", n)
				assert.Equal(t, want, sh.Backoff(n), "sharding, n=%d", n)
			}
		})
	}
}
