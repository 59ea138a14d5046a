package manager_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
)

// refusedUntilFurtherNotice makes every delete of the pod fail until
// FailDeletes says otherwise: an admission policy, a webhook that is down.
const refusedUntilFurtherNotice = 1 << 30

// An eviction that fails for a reason that can pass is never given up: it is
// retried, deciding afresh each time, with waits doubling from 1 s to 30 s,
// and goes through at the first retry after the refusal ends. A neighbour on
// the same node is not held up.
func TestEvictionRetriedUntilTheRefusalEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) { c.EvictionRetry = timedqueue.RetryPolicy{} })
		e.addNode("n1")
		e.addPod("held", "n1", nil)
		e.addPod("neighbour", "n1", nil)
		e.c.FailDeletes("default", "held", refusedUntilFurtherNotice)
		e.taint("n1")
		assert.False(t, e.exists("neighbour"), "the neighbour was held up")
		for range 45 { // attempts at 0, 1, 3, 7, 15, 31 s
			e.step(time.Second)
		}
		require.True(t, e.exists("held"))
		e.c.FailDeletes("default", "held", 0) // the refusal ends
		e.step(16*time.Second - time.Nanosecond)
		assert.True(t, e.exists("held"), "retried before its backoff")
		e.step(time.Nanosecond) // the attempt at 61 s
		assert.False(t, e.exists("held"), "not evicted at the first retry after the refusal ended")
		assert.Equal(t, int64(0), e.manager().Stats().Failed)
	})
}

// A pod refused for good draws an attempt every 30 s once the backoff is
// capped, one "Marking for deletion" event for the decision, and a Warning
// that it keeps failing at most every 5 minutes, with the last error; its
// eviction is shown failing since its first failure, never given up.
func TestEvictionRefusedForGoodIsBoundedAndSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) { c.EvictionRetry = timedqueue.RetryPolicy{} })
		e.addNode("n1")
		e.addPod("held", "n1", nil)
		e.c.FailDeletes("default", "held", refusedUntilFurtherNotice)
		e.taint("n1")
		for range 600 {
			e.step(time.Second)
		}
		require.True(t, e.exists("held"))
		// 0, 1, 3, 7, 15, 31 s, then every 30 s: 18 more by 600 s.
		assert.Equal(t, 24, e.c.Stats().Injected, "attempts in 10 minutes")

		var marking, warnings []string
		for _, ev := range e.rec.take() {
			switch {
			case strings.Contains(ev, "Marking for deletion"):
				marking = append(marking, ev)
			case strings.HasPrefix(ev, "Warning "):
				warnings = append(warnings, ev)
			}
		}
		assert.Len(t, marking, 1, "one Marking for deletion per decision, not per attempt")
		require.Len(t, warnings, 2, "a Warning at the second failure, then at most every 5 minutes: %q", warnings)
		assert.Contains(t, warnings[0], "Failing to delete Pod default/held since 2025-01-01T00:00:00Z (2 attempts), retrying")
		assert.Contains(t, warnings[0], "injected failure")

		pending := e.manager().Pending()
		require.Len(t, pending, 1)
		assert.False(t, pending[0].Failed)
		assert.Equal(t, t0, pending[0].FailingSince)
		assert.Equal(t, 24, pending[0].Attempts)
		n, since := e.manager().Failing()
		assert.Equal(t, 1, n)
		assert.Equal(t, t0, since)
		assert.Equal(t, int64(0), e.manager().Stats().Failed)

		e.c.FailDeletes("default", "held", 0)
		e.step(30 * time.Second)
		assert.False(t, e.exists("held"))
		n, _ = e.manager().Failing()
		assert.Equal(t, 0, n)
	})
}
