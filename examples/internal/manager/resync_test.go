package manager_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

// withResync gives the manager the cluster's nodes to look at again.
func withResync(e **env) func(*manager.Config) {
	return func(c *manager.Config) {
		c.ListNodes = func() ([]*v1.Node, error) { return (*e).c.ListNodes(), nil }
	}
}

// A pod that must go but whose update never reached the manager (an event
// missed) is found by the resync, from the caches, two looks in a row, and
// evicted.
func TestResyncFindsAPodWithNoEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e *env
		e = newEnv(t, withResync(&e))
		e.addNode("n1")
		e.taint("n1")
		e.pause(true) // the pod's add is missed
		e.addPod("missed", "n1", nil)
		e.pause(false)
		e.step(manager.DefaultResyncPeriod)
		assert.True(t, e.exists("missed"), "one look is not enough: its update may be on its way")
		e.step(manager.DefaultResyncPeriod)
		assert.False(t, e.exists("missed"), "the resync did not find the pod")
		assert.Equal(t, int64(1), e.manager().Stats().ResyncFound)
	})
}

// When no event is missed, the resync finds nothing: pods counting down,
// pods tolerating for ever, evictions retried, all have what they need.
func TestResyncFindsNothingWhenNothingIsMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e *env
		e = newEnv(t, withResync(&e))
		for n := range 3 {
			node := fmt.Sprintf("n%d", n)
			e.addNode(node)
			for i := range 10 {
				e.addPod(fmt.Sprintf("%s-p%d", node, i), node, tolerating(int64(i*40-40)))
			}
		}
		e.c.FailDeletes("default", "n0-p1", 3)
		for n := range 3 {
			e.taint(fmt.Sprintf("n%d", n))
		}
		for range 40 {
			e.step(10 * time.Second)
		}
		assert.Equal(t, int64(0), e.manager().Stats().ResyncFound)
		assert.Equal(t, 3, e.c.NumPods(), "the pods tolerating for ever stay")
	})
}
