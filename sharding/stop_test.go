package sharding_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/sharding"
)

// Rule: at shutdown, an item whose handler fails because its ctx was
// cancelled is dropped as stopped (ErrStopped, counted once), not counted
// as a failed attempt, a retry, or a drop after failed attempts.
func TestHandlerFailingAtShutdownDroppedAsStopped(t *testing.T) {
	for _, maxAttempts := range []int{1, 3} {
		t.Run(fmt.Sprint("MaxAttempts=", maxAttempts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv()
				cfg := e.config()
				cfg.Retry = sharding.RetryPolicy{MaxAttempts: maxAttempts}
				cfg.HandleHigh = func(ctx context.Context, n string) error {
					e.record("H:" + n)
					<-ctx.Done()
					return ctx.Err()
				}
				d, err := sharding.New(cfg)
				require.NoError(t, err)
				stop := run(t, d)

				d.AddHigh("n")
				synctest.Wait()
				stop()
				drops := e.dropped()
				require.Len(t, drops, 1)
				assert.Equal(t, "n", drops[0].High)
				assert.ErrorIs(t, drops[0].Err, sharding.ErrStopped)
				assert.Equal(t, 0, drops[0].Attempts)
				assert.Equal(t, 0, e.metrics.get(e.metrics.retries, sharding.LaneHigh))
				assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneHigh))
				assert.Equal(t, 0, e.metrics.get(e.metrics.depth, sharding.LaneHigh))
				assert.NotContains(t, e.logged(), "failed attempts")
				assert.Equal(t, []string{"H:n"}, e.recorded())
			})
		})
	}
}

// Rule: an add made once the dispatcher stopped is dropped at once, and the
// log says so in words that hold both during Run's shutdown and after it.
func TestAddAfterStopLoggedAsStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Logger = verboseEnvLogger(e)
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)()
		d.AddLow("x/p")
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Contains(t, e.logged(), "Dropping item added after the dispatcher stopped")
	})
}
