package app

import (
	"github.com/go-logr/logr"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
)

// newFence returns the fence of a replica that runs with leader election,
// nil without: the Lease lock of its elector is wrapped by it, and so are
// the transports of the clients that write pods and events ([Run]), so
// that a pod write or an event leaves only while the last renewal of the
// Lease that succeeded is younger than the renew deadline, checked as the
// request leaves, after the rate limiter and on every retry. A leader must
// stop acting then, whatever its elector still waits for: the elector
// checks its deadline only between tries, and one renewal sent into a
// partition waits for its request timeout, so it may notice the loss after
// the renew deadline, and after a standby, which counts the lease duration
// from when it saw the last renewal, has taken over.
func newFence(o Options, log logr.Logger) (*leasefence.Fence, error) {
	if !o.LeaderElect {
		return nil, nil
	}
	return leasefence.New(leasefence.Config{RenewDeadline: o.RenewDeadline, Logger: log})
}
