package manager

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// PodClient is the write access to pods the manager needs. An adapter over a
// client-go clientset implements it with Pods(namespace).Delete and a status
// patch (as Kubernetes' utilpod.PatchPodStatus does); the in-memory cluster
// of the example implements it directly.
type PodClient interface {
	// SetPodCondition sets cond on the pod's status, replacing a condition of
	// the same type. If uid is not empty and is not the pod's UID it must
	// fail with a Conflict error and change nothing.
	SetPodCondition(ctx context.Context, namespace, name string, uid types.UID, cond v1.PodCondition) error
	// DeletePod deletes the pod, honouring opts.Preconditions.UID (a
	// mismatch fails with a Conflict error and deletes nothing). A missing
	// pod fails with a NotFound error.
	DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// EventRecorder records events about pods. Its method has the signature of
// client-go's record.EventRecorder.Eventf, so a recorder from an
// EventBroadcaster can be used as is.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Defaults of the zero fields of [Config].
const (
	// DefaultResyncPeriod: a pod whose eviction was missed is found within
	// two periods.
	DefaultResyncPeriod = 30 * time.Second
	// DefaultFailureEventInterval: an eviction that keeps failing says so
	// at most every 5 minutes.
	DefaultFailureEventInterval = 5 * time.Minute
	// NodeReadTTL is how long one read of a node (Config.ReadNode) serves
	// the evictions of the node's pods.
	NodeReadTTL = time.Second
)

// DefaultEvictionRetry is the retry policy of evictions: never given up
// while the pod must go, waits doubling from 1 s to 30 s.
var DefaultEvictionRetry = timedqueue.RetryPolicy{
	MaxAttempts:    timedqueue.UnlimitedAttempts,
	InitialBackoff: time.Second,
	MaxBackoff:     30 * time.Second,
}

// Config configures a [Manager]. GetNode, GetPod, PodsOnNode and Client are
// required; every other field has a usable zero value, stated on the field.
type Config struct {
	// GetNode returns the named node, or an error for which
	// k8s.io/apimachinery/pkg/api/errors.IsNotFound is true if there is none
	// (a node lister's Get).
	GetNode func(name string) (*v1.Node, error)
	// GetPod returns the pod namespace/name, or a NotFound error (a pod
	// lister's Pods(namespace).Get).
	GetPod func(namespace, name string) (*v1.Pod, error)
	// PodsOnNode returns the pods bound to the named node (an informer
	// indexer on spec.nodeName).
	PodsOnNode func(nodeName string) ([]*v1.Pod, error)
	// ListNodes, if not nil, returns every node (a node lister's List): the
	// manager then looks again, every ResyncPeriod, at the pods on nodes
	// with NoExecute taints, from the caches and with no request, and
	// schedules the eviction of any that must go and has none, whatever the
	// reason it was missed ([Stats].ResyncFound counts them). Nil: no
	// resync.
	ListNodes func() ([]*v1.Node, error)
	// ResyncPeriod is how often ListNodes' nodes are looked at again. Zero
	// means DefaultResyncPeriod. A pod is counted as missed, and handed to
	// its node's handler, when two looks in a row find it with no eviction
	// scheduled: an update being handled is not taken for a miss.
	ResyncPeriod time.Duration
	// ReadNode, if not nil, reads the named node from the API server (a
	// clientset's Nodes().Get), for the pods whose eviction the cached node
	// may wrongly call for: a pod that does not tolerate a taint whose
	// TimeAdded is before the pod was bound was placed there by a scheduler
	// that did not see the taint, so the taint may be gone and the node
	// cache behind. Before evicting such a pod the manager reads the node
	// and decides on what it says; one read serves every pod of the node
	// for NodeReadTTL. Pods bound before the taint, as in a zone outage,
	// cost no read. Nil decides on the cache alone, as upstream.
	ReadNode func(ctx context.Context, name string) (*v1.Node, error)
	// Client sets conditions on pods and deletes them.
	Client PodClient

	// Recorder, if not nil, receives "Scheduled for deletion", "Marking for
	// deletion" and "Cancelling deletion" events, with the reason
	// tolerations.EventReasonTaintManagerEviction, or
	// [EventReasonDeviceTaintManagerEviction] for an eviction a device's
	// taint decided. Nil records none.
	Recorder EventRecorder
	// Clock is the source of time for deadlines, the eviction queue and the
	// dispatcher's retries. Nil means clock.RealClock{}.
	Clock clock.Clock
	// Logger receives the manager's logs and is passed to the queue and the
	// dispatcher. Nil means klog.Background(); a given Logger is used as is,
	// so logr.Discard() silences the manager.
	Logger *logr.Logger
	// Matcher matches tolerations against taints. The zero Matcher matches
	// as Kubernetes does with comparison operators off. It is used only when
	// Countdowns is nil; a given Countdowns matches as it was made to.
	Matcher tolerations.Matcher
	// Countdowns remembers the countdowns' starts and deadlines. Nil: the
	// manager makes one and feeds it from NodeUpdated and PodUpdated. A
	// controller whose standbys must take over with the leader's deadlines
	// makes one at start-up and has its informers feed it on every replica,
	// leading or not (ObserveNode, ObservePod, ObservePodDeleted,
	// ForgetNode), and gives it to each Manager it runs.
	Countdowns *tolerations.Countdowns

	// Devices, if not nil, returns the devices allocated to pod, each with
	// the tolerations it was allocated with and the taints it has now (the
	// devices of the claims that are the pod's, as examples/controller reads
	// them with k8s.io/dynamic-resource-allocation). Every decision
	// for the pod is then one for its node's taints and its devices' taints
	// together, the earliest of both
	// ([tolerations.Countdowns.DecideWithDevices]): a node update that
	// decides Never does not cancel a device's eviction, nor the other way
	// round. Nil decides from node taints only. It is called from handlers
	// and evictions, concurrently, and must not block. Call
	// [Manager.DevicesChanged] when what it returns for a pod may change.
	Devices func(pod *v1.Pod) []tolerations.Device
	// Evicted, if not nil, is called after the manager removed a pod (a
	// delete or an eviction that succeeded; not in a dry run) with the
	// decision it removed it for, from the eviction's goroutine. It must not
	// block.
	Evicted func(pod *v1.Pod, d tolerations.Decision)

	// Shards is the number of handler workers. Zero means 8, as the
	// original.
	Shards int
	// MaxConcurrentEvictions bounds the evictions (API calls) running at
	// once. Zero means timedqueue.DefaultMaxConcurrency.
	MaxConcurrentEvictions int
	// EvictionRetry says how a failed eviction is retried. Its zero fields
	// take DefaultEvictionRetry's: an eviction that fails for a reason that
	// can pass (a refusal by admission, a throttled or failed request) is
	// retried, each attempt deciding afresh, until the pod is gone, no
	// longer has to go or is another pod, with waits doubling from 1 s up
	// to 30 s: a pod refused for good costs two attempts a minute. A
	// MaxAttempts that runs out gives the eviction up: a Warning event,
	// [Stats].Failed, and the pod is decided afresh on its next update or
	// at the next resync.
	EvictionRetry timedqueue.RetryPolicy
	// FailureEventInterval is how often, at most, an eviction that keeps
	// failing records its Warning event, with the last error: at its
	// second failure, then at most once per interval. Zero means
	// DefaultFailureEventInterval.
	FailureEventInterval time.Duration

	// UseEvictionAPI evicts pods through the Eviction API, which honours
	// PodDisruptionBudgets, instead of deleting them; Client must implement
	// [PodEvicter]. The API server sets the DisruptionTarget condition
	// itself, so the manager does not set it first. An eviction a budget
	// refuses is not a failure: it is retried with the backoff of
	// EvictionRetry (whose MaxAttempts it does not use up), each retry
	// deciding afresh, holding no eviction slot while it waits, and its
	// deadline stays. False: delete directly, as upstream.
	UseEvictionAPI bool
	// EvictionFallbackAfter is, with UseEvictionAPI, how long past its
	// deadline an eviction a budget refuses is retried before the pod is
	// deleted directly (with an event and a count in [Stats].FallbackDeleted).
	// Zero means never: the eviction is retried until a budget allows it or
	// the pod no longer has to go.
	EvictionFallbackAfter time.Duration
	// EvictionRate is the eviction budget: at most this many evictions
	// (delete or Eviction API calls) start per second, on Clock, with bursts
	// of EvictionBurst. Due evictions wait for a token in deadline order,
	// holding no eviction slot. Zero means no limit.
	EvictionRate float64
	// EvictionBurst is the eviction budget's burst. Zero means 1.
	EvictionBurst int
	// EvictionRatePerNamespace gives each namespace a budget of its own
	// (EvictionRate and EvictionBurst each): one namespace's wait never
	// holds back another's.
	EvictionRatePerNamespace bool
	// DryRun decides, schedules, waits for budgets and counts as for real,
	// but never writes to a pod: where a real run would delete or evict, it
	// records a "would delete" event, once per pod UID, and counts it in
	// [Stats].DryRun.
	DryRun bool
	// Metrics, if not nil, receives the manager's delay and wait
	// observations.
	Metrics Metrics

	// QueueMetrics, if not nil, receives the metrics of the eviction queue,
	// named "noexecute-evictions".
	QueueMetrics timedqueue.MetricsProvider
	// DispatcherMetrics, if not nil, receives the metrics of the dispatcher
	// of node and pod updates, named "noexecute-updates".
	DispatcherMetrics sharding.MetricsProvider

	// TrackIdle makes the manager track its outstanding work so that
	// [Manager.WaitIdle] can report when there is none. It costs a map entry
	// per scheduled eviction until the next WaitIdle call; it is meant for
	// tests and demos on a fake clock. False means WaitIdle returns an error.
	TrackIdle bool
}

func (c *Config) validate() error {
	switch {
	case c.GetNode == nil:
		return errors.New("manager: GetNode must not be nil")
	case c.GetPod == nil:
		return errors.New("manager: GetPod must not be nil")
	case c.PodsOnNode == nil:
		return errors.New("manager: PodsOnNode must not be nil")
	case c.Client == nil:
		return errors.New("manager: Client must not be nil")
	case c.Shards < 0:
		return fmt.Errorf("manager: Shards must not be negative, got %d", c.Shards)
	case c.MaxConcurrentEvictions < 0:
		return fmt.Errorf("manager: MaxConcurrentEvictions must not be negative, got %d", c.MaxConcurrentEvictions)
	case c.EvictionFallbackAfter < 0:
		return fmt.Errorf("manager: EvictionFallbackAfter must not be negative, got %v", c.EvictionFallbackAfter)
	case c.EvictionRate < 0 || math.IsNaN(c.EvictionRate) || math.IsInf(c.EvictionRate, 0):
		return fmt.Errorf("manager: EvictionRate must be a finite number ≥ 0, got %v", c.EvictionRate)
	case c.EvictionBurst < 0:
		return fmt.Errorf("manager: EvictionBurst must not be negative, got %d", c.EvictionBurst)
	case c.ResyncPeriod < 0:
		return fmt.Errorf("manager: ResyncPeriod must not be negative, got %v", c.ResyncPeriod)
	case c.FailureEventInterval < 0:
		return fmt.Errorf("manager: FailureEventInterval must not be negative, got %v", c.FailureEventInterval)
	}
	if c.UseEvictionAPI {
		if _, ok := c.Client.(PodEvicter); !ok {
			return fmt.Errorf("manager: UseEvictionAPI needs a Client that implements PodEvicter; %T does not", c.Client)
		}
	}
	return nil
}
