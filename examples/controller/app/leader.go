package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
)

// watchdogTimeout is how long past the lease duration a leader that has
// not renewed stays healthy; after that /healthz fails.
const watchdogTimeout = 20 * time.Second

func newWatchdog(o Options) *leaderelection.HealthzAdaptor {
	if !o.LeaderElect {
		return nil
	}
	return leaderelection.NewLeaderHealthzAdaptor(watchdogTimeout)
}

// runElected waits for the lease, then runs the manager while it holds
// it. The elector runs on a context of its own, cancelled only once the
// manager has stopped: with ReleaseOnCancel the elector gives the lease up
// as soon as its context ends, and no other replica may start before this
// one's evictions are over.
func (c *controller) runElected(ctx context.Context, client kubernetes.Interface, fence *leasefence.Fence, watchdog *leaderelection.HealthzAdaptor) error {
	if fence == nil {
		var err error
		if fence, err = newFence(c.o, c.log); err != nil {
			return fmt.Errorf("app: %w", err)
		}
	}
	lock := fence.Lock(&resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Namespace: c.o.LeaseNamespace, Name: c.o.LeaseName},
		Client:    client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{
			Identity:      c.o.Identity,
			EventRecorder: c.recorder,
		},
	})
	started := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.o.LeaseDuration,
		RenewDeadline:   c.o.RenewDeadline,
		RetryPeriod:     c.o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            c.o.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			// leading is done when renewing fails (or the elector stops).
			OnStartedLeading: func(leading context.Context) { started <- leading },
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				c.log.Info("Leader", "lease", c.o.LeaseNamespace+"/"+c.o.LeaseName, "identity", identity, "self", identity == c.o.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("app: leader election: %w", err)
	}
	watchdog.SetLeaderElection(le)

	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		le.Run(electorCtx)
	}()
	defer func() {
		stopElector()
		<-electorDone // released the lease, if held
	}()

	c.log.Info("Waiting for the lease", "lease", c.o.LeaseNamespace+"/"+c.o.LeaseName, "identity", c.o.Identity)
	select {
	case <-ctx.Done():
		return nil
	case <-electorDone:
		return errors.New("app: leader election stopped before acquiring the lease")
	case leading := <-started:
		c.log.Info("Acquired the lease: starting the manager", "identity", c.o.Identity)
		// Lost when the elector says so, or when the fence refuses writes
		// (a renew deadline after the last renewal that succeeded, or a
		// refused request), if that comes first.
		fenceCtx, stopFence := context.WithCancel(leading)
		defer stopFence()
		expired := fence.Lost(fenceCtx)
		lost := make(chan struct{})
		go func() {
			defer close(lost)
			<-expired
			if fenceCtx.Err() == nil {
				c.log.Info("No renewal of the lease succeeded for the renew deadline: stopping", "renewDeadline", c.o.RenewDeadline)
			}
		}()
		err := c.runManager(ctx, lost)
		stopFence()
		return err
	}
}
