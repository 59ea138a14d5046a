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

// An eviction whose attempts all fail is given up, and the manager says so:
// a Warning event, Stats.Failed, and Pending lists it, marked Failed with
// its attempts and last error, until the pod is decided again (its next
// update) or goes.
func TestGivenUpEvictionIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(c *manager.Config) {
			c.EvictionRetry = timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute}
		})
		e.addNode("n1")
		p := e.addPod("web", "n1", nil)
		e.c.FailDeletes("default", "web", 3)
		e.taint("n1") // untolerated: the first attempt now
		e.step(time.Second)
		e.step(2 * time.Second) // the third and last attempt
		require.True(t, e.exists("web"))
		require.Equal(t, int64(1), e.manager().Stats().Failed)

		var gaveUp []string
		for _, ev := range e.rec.take() {
			if strings.HasPrefix(ev, "Warning ") && strings.Contains(ev, "Gave up") {
				gaveUp = append(gaveUp, ev)
			}
		}
		require.Len(t, gaveUp, 1, "one Warning event")
		assert.Contains(t, gaveUp[0], "Gave up deleting Pod default/web after 3 attempts")
		assert.Contains(t, gaveUp[0], "injected failure")

		pending := e.manager().Pending()
		require.Len(t, pending, 1)
		assert.True(t, pending[0].Failed, "%+v", pending[0])
		assert.Equal(t, p.UID, pending[0].UID)
		assert.Equal(t, 3, pending[0].Attempts)
		assert.Equal(t, t0, pending[0].Deadline)
		assert.Contains(t, pending[0].LastError, "injected failure")

		// The pod's next update decides again: scheduled, no longer failed,
		// and this time the delete goes through.
		upd := e.pod("web").DeepCopy()
		upd.Spec.Tolerations = tolerating(0)
		_, err := e.c.UpdatePod(upd)
		require.NoError(t, err)
		e.settle()
		assert.False(t, e.exists("web"))
		assert.Empty(t, e.manager().Pending())
	})
}
