package noexecute

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
)

// Leader election timings [NewLeaderFence] sets when the options leave
// them nil: controller-runtime's defaults.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrLeaseExpired is returned by [LeaderFence.Start] when no renewal of
// the Lease succeeded for the renew deadline: the manager stops, as it does
// when its elector gives up.
var ErrLeaseExpired = errors.New("noexecute: no renewal of the Lease succeeded within the renew deadline")

var _ ctrlmanager.LeaderElectionRunnable = (*LeaderFence)(nil)

// LeaderFence keeps a manager that may no longer lead from writing pods
// and events: see package leasefence of examples/controller. It is also
// the Runnable that stops the manager once its fence refuses writes.
type LeaderFence struct {
	// Config is a copy of the config given to NewLeaderFence whose
	// transport the fence guards: give it to ctrl.NewManager.
	Config *rest.Config

	fence *leasefence.Fence
}

// NewLeaderFence sets opts up for leader election through a fence, and
// makes a copy of cfg whose transport it guards ([LeaderFence.Config]):
// give that and opts to ctrl.NewManager, then add the LeaderFence to the
// manager (mgr.Add). cfg is not changed. Every write of a pod (its
// status, its eviction) or an event by the manager's clients then leaves
// only while the last renewal of the Lease that succeeded is younger than
// the renew deadline; the Lease lock's release on cancel
// (LeaderElectionReleaseOnCancel) never empties a Lease another replica
// holds.
//
// opts must enable leader election and name the Lease
// (LeaderElectionID, LeaderElectionNamespace). Nil LeaseDuration,
// RenewDeadline and RetryPeriod take controller-runtime's defaults. The
// lock is a coordination.k8s.io Lease; its identity is the host name and a
// UUID, as controller-runtime makes it, its client has cfg's credentials
// with " leader-election" after the User-Agent and a timeout of half the
// renew deadline (at least 1 s). The elector records no events.
func NewLeaderFence(cfg *rest.Config, opts *ctrlmanager.Options) (*LeaderFence, error) {
	if !opts.LeaderElection || opts.LeaderElectionID == "" || opts.LeaderElectionNamespace == "" {
		return nil, fmt.Errorf("noexecute: a leader fence needs LeaderElection, LeaderElectionID and LeaderElectionNamespace, got %t, %q, %q",
			opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace)
	}
	for _, d := range []struct {
		field **time.Duration
		def   time.Duration
	}{{&opts.LeaseDuration, DefaultLeaseDuration}, {&opts.RenewDeadline, DefaultRenewDeadline}, {&opts.RetryPeriod, DefaultRetryPeriod}} {
		if *d.field == nil {
			v := d.def
			*d.field = &v
		}
	}
	renew := *opts.RenewDeadline
	f, err := leasefence.New(leasefence.Config{RenewDeadline: renew, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	id, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("noexecute: leader election identity: %w", err)
	}
	id += "_" + string(uuid.NewUUID())
	lcfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	lcfg.Timeout = max(renew/2, time.Second)
	client, err := coordinationv1client.NewForConfig(lcfg)
	if err != nil {
		return nil, fmt.Errorf("noexecute: leader election client: %w", err)
	}
	opts.LeaderElectionResourceLockInterface = f.Lock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.LeaderElectionNamespace, Name: opts.LeaderElectionID},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		Labels:     opts.LeaderElectionLabels,
	})
	fenced := rest.CopyConfig(cfg)
	fenced.Wrap(f.Wrap)
	return &LeaderFence{Config: fenced, fence: f}, nil
}

// Allowed reports whether the manager may write pods and events now.
func (l *LeaderFence) Allowed() bool { return l.fence.Allowed() }

// Start waits until the fence refuses writes, and then returns
// [ErrLeaseExpired], which stops the manager; or until ctx is done, and
// then returns nil. The manager starts it once it leads.
func (l *LeaderFence) Start(ctx context.Context) error {
	<-l.fence.Lost(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return ErrLeaseExpired
}

// NeedLeaderElection reports true: a LeaderFence runs while its manager
// leads.
func (*LeaderFence) NeedLeaderElection() bool { return true }
