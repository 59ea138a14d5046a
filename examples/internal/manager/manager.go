package manager

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// podUpdate is a pod's item in the dispatcher's low lane. NodeName is the
// pod's node when the event was seen: it is the shard key, so a pod is handled
// by the worker that handles its node. Deleted is set on the item of a delete
// event only, to the deleted pod's UID as a removal record names it
// (statuses.uidHash: never 0): a pod deleted and added again before its item
// is handled has an item for each, and the delete forgets only its own pod's
// record. (A hash rather than the UID keeps the item at 56 bytes: a node
// failure queues one per pod.)
type podUpdate struct {
	Namespace, Name, NodeName string
	Deleted                   uint64
}

func (p podUpdate) key() types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// Stats counts what a Manager has done since New. All counts only grow.
type Stats struct {
	Evicted int64 // pods removed by an eviction: Deleted + EvictedByAPI + FallbackDeleted
	Deleted int64 // pods deleted directly (UseEvictionAPI off)
	// EvictedByAPI counts pods evicted through the Eviction API.
	EvictedByAPI int64
	// FallbackDeleted counts pods deleted directly after a disruption budget
	// refused their eviction past EvictionFallbackAfter.
	FallbackDeleted int64
	// Refused counts evictions a disruption budget refused (each is
	// retried: one pod may be refused many times).
	Refused int64
	// DryRun counts the pods a dry run would have removed, once per UID.
	DryRun int64
	// BudgetWaits counts evictions that waited for an eviction budget's
	// token.
	BudgetWaits int64
	Gone        int64 // evictions that found the pod already deleted
	Terminating int64 // evictions skipped because the pod was terminating
	Rescheduled int64 // evictions that fired early (the pod changed) and were handed back to a handler
	Dropped     int64 // evictions that fired when no longer due and were dropped
	Cancelled   int64 // scheduled evictions cancelled by a handler
	Failed      int64 // evictions given up after the retry policy ran out
	// ResyncFound counts the pods the resync found that had to go and had
	// no eviction scheduled (see Config.ListNodes): it should stay at 0.
	ResyncFound int64
	// NodeReads counts the nodes read from the API server before evicting
	// (see Config.ReadNode).
	NodeReads int64
}

type stats struct {
	evicted, gone, terminating, rescheduled, dropped, cancelled, failed  atomic.Int64
	deleted, evictedByAPI, fallbackDeleted, refused, dryRun, budgetWaits atomic.Int64
	resyncFound, nodeReads                                               atomic.Int64
}

// Manager evicts pods from nodes with NoExecute taints they do not tolerate.
// It is safe for concurrent use by multiple goroutines. The zero value is not
// usable; call [New].
type Manager struct {
	cfg   Config
	clock clock.Clock
	log   logr.Logger

	dispatcher *sharding.Dispatcher[string, podUpdate]
	evictions  *timedqueue.TimedWorkerQueue[types.NamespacedName]

	countdowns *tolerations.Countdowns
	// observes says whether the manager feeds countdowns itself, from
	// NodeUpdated and PodUpdated (Config.Countdowns nil).
	observes bool
	budgets  *budgets // nil: no eviction budget
	status   *statuses
	failed   failedEvictions // given up: shown by Pending until decided again
	byDevice deviceKeys      // the pods whose eviction a device's taint decided
	idle     *idleTracker    // nil unless Config.TrackIdle
	stats    stats
	// nodeReads reads nodes from the API server; nil without ReadNode.
	nodeReads *nodeReads
	// failureEventInterval is Config.FailureEventInterval or its default.
	failureEventInterval time.Duration
	started              atomic.Bool
	// stopping is set once Run stops the eviction queue: an attempt that
	// fails then, its ctx cancelled, was cut short, not given up.
	stopping atomic.Bool
}

// New returns a Manager for cfg, or an error naming the first invalid field.
// It starts no goroutine: the dispatcher's workers start in [Manager.Run],
// and the eviction queue's timer and workers run only while evictions are
// scheduled, until Run returns.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, clock: cfg.Clock, status: newStatuses()}
	m.budgets = newBudgets(cfg.EvictionRate, cfg.EvictionBurst, cfg.EvictionRatePerNamespace, m.waitsForToken)
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	m.countdowns = cfg.Countdowns
	if m.countdowns == nil {
		m.countdowns, m.observes = tolerations.NewCountdowns(m.clock, cfg.Matcher), true
	}
	if cfg.Logger != nil {
		m.log = *cfg.Logger
	} else {
		m.log = klog.Background()
	}
	m.log = m.log.WithName("noexecute")
	shards := cfg.Shards
	if shards == 0 {
		shards = sharding.DefaultShards
	}
	maxEvictions := cfg.MaxConcurrentEvictions
	if maxEvictions == 0 {
		maxEvictions = timedqueue.DefaultMaxConcurrency
	}
	m.nodeReads = newNodeReads(cfg.ReadNode, m.clock, func() { m.stats.nodeReads.Add(1) })
	m.failureEventInterval = cfg.FailureEventInterval
	if m.failureEventInterval == 0 {
		m.failureEventInterval = DefaultFailureEventInterval
	}
	retry := cfg.EvictionRetry
	if retry.MaxAttempts == 0 {
		retry.MaxAttempts = DefaultEvictionRetry.MaxAttempts
	}
	if retry.InitialBackoff == 0 && retry.MaxBackoff == 0 {
		retry.InitialBackoff, retry.MaxBackoff = DefaultEvictionRetry.InitialBackoff, DefaultEvictionRetry.MaxBackoff
	}
	opts := []timedqueue.Option{
		timedqueue.WithClock(m.clock),
		timedqueue.WithMaxConcurrency(maxEvictions),
		timedqueue.WithRetry(retry),
		timedqueue.WithLogger(m.log),
		timedqueue.WithName("noexecute-evictions"),
	}
	if cfg.TrackIdle {
		m.idle = newIdleTracker(shards)
		opts = append(opts, timedqueue.WithMetricsProvider(idleMetrics{t: m.idle, next: cfg.QueueMetrics}))
	} else if cfg.QueueMetrics != nil {
		opts = append(opts, timedqueue.WithMetricsProvider(cfg.QueueMetrics))
	}
	q, err := timedqueue.New(m.evict, opts...)
	if err != nil {
		return nil, err
	}
	m.evictions = q
	q.SetRetryHook(m.evictionRetried)
	q.SetFailureHook(m.evictionFailed)
	if m.budgets != nil {
		q.SetAdmitFunc(m.admit)
	}

	d, err := sharding.New(sharding.Config[string, podUpdate]{
		Shards: shards,
		// Pods are sharded by their node's name, like nodes: a node and the
		// pods on it are never handled at the same time, and a node's update
		// is handled before the updates of its pods queued behind it. (A
		// pod that changes node changes shard: see handOverIfReplaced.)
		HighKey:    func(node string) string { return node },
		LowKey:     func(p podUpdate) string { return p.NodeName },
		HandleHigh: m.trackHigh(m.handleNode),
		HandleLow:  m.trackLow(m.handlePod),
		Clock:      m.clock,
		Logger:     &m.log,
		OnDrop:     m.dropped,
		Metrics:    cfg.DispatcherMetrics,
		Name:       "noexecute-updates",
	})
	if err != nil {
		_ = q.Shutdown(context.Background())
		return nil, err
	}
	m.dispatcher = d
	return m, nil
}

// Run handles updates and evicts pods until ctx is done. Then it stops the
// dispatcher (queued updates are dropped), stops the eviction queue
// (scheduled evictions are dropped; a restarted manager recomputes the same
// deadlines) and waits for running handlers and evictions to return: the
// return of every handler and eviction happens before Run returns. Run may
// be called once; a second call logs an error and returns at once.
func (m *Manager) Run(ctx context.Context) {
	if m.started.Swap(true) {
		m.log.Error(nil, "Run called twice; ignoring the second call")
		return
	}
	m.log.Info("Starting NoExecute taint manager")
	resynced := make(chan struct{})
	if m.cfg.ListNodes != nil {
		go func() { defer close(resynced); m.resyncLoop(ctx) }()
	} else {
		close(resynced)
	}
	m.dispatcher.Run(ctx)
	<-resynced // it adds to the dispatcher, which has stopped: nothing is lost
	// The dispatcher has stopped, so nothing schedules evictions any more.
	m.stopping.Store(true)
	if err := m.evictions.Shutdown(context.WithoutCancel(ctx)); err != nil {
		m.log.Error(err, "Shutting down the eviction queue")
	}
	m.log.Info("Stopped NoExecute taint manager")
}

// NodeUpdated tells the manager that a node was added (old is nil), updated
// or deleted (new is nil). Updates that leave the node's NoExecute taints
// unchanged are ignored. It never blocks.
func (m *Manager) NodeUpdated(old, new *v1.Node) {
	var name string
	var oldTaints, newTaints []v1.Taint
	if old != nil {
		name = old.Name
		oldTaints = tolerations.GetNoExecuteTaints(old.Spec.Taints)
	}
	if new != nil {
		name = new.Name
		newTaints = tolerations.GetNoExecuteTaints(new.Spec.Taints)
	}
	if m.observes {
		if new != nil {
			m.countdowns.ObserveNode(new)
		} else if old != nil {
			m.countdowns.ForgetNode(old.Name)
		}
	}
	// Semantic equality treats nil and empty alike and compares TimeAdded,
	// which matters: the deadlines count from it.
	if name == "" || old != nil && new != nil && apiequality.Semantic.DeepEqual(oldTaints, newTaints) {
		return
	}
	if old == nil && len(newTaints) == 0 && m.cfg.Devices == nil {
		// A node added with no NoExecute taint: nothing on it to evict, and
		// nothing scheduled for its pods to cancel (a node deleted before,
		// under the name, had its pods' evictions cancelled then). Each of
		// its pods is decided on its own update; so a start-up, when every
		// node is added, does not read every pod once for its node too.
		return
	}
	m.dispatcher.AddHigh(name)
}

// PodUpdated tells the manager that a pod was added (old is nil), updated or
// deleted (new is nil). Updates that change neither the pod's node name, its
// tolerations nor its UID (nor, with Config.Devices, the ResourceClaims it
// names) are ignored, and so are pods with no node name (unscheduled). It
// never blocks.
func (m *Manager) PodUpdated(old, new *v1.Pod) {
	p := new
	if p == nil {
		p = old
	}
	if p == nil {
		return
	}
	if m.observes {
		if new != nil {
			m.countdowns.ObservePod(new)
		} else {
			m.countdowns.ObservePodDeleted(old)
		}
	}
	if old != nil && new != nil &&
		old.Spec.NodeName == new.Spec.NodeName &&
		old.UID == new.UID &&
		tolerationsEqual(old.Spec.Tolerations, new.Spec.Tolerations) &&
		(m.cfg.Devices == nil || claimsEqual(old, new)) {
		return
	}
	m.PodChanged(PodRef{Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, UID: p.UID}, new == nil)
}

// PodRef names a pod for [Manager.PodChanged]: all the manager keeps of an
// update until it handles it (and then reads the pod through
// Config.GetPod).
type PodRef struct {
	Namespace, Name, NodeName string
	UID                       types.UID
}

// PodChanged tells the manager that the pod p was added, deleted (deleted
// is true) or updated in a way that may change its decision: its node name,
// tolerations or UID (or, with Config.Devices, its ResourceClaims). It is
// [Manager.PodUpdated] for a caller that filters updates itself, from
// objects that are not *v1.Pod (an informer caching podcache.Records): it
// needs no pod, and it does not feed the countdowns, so use it only with
// Config.Countdowns set and fed by the caller. It never blocks.
func (m *Manager) PodChanged(p PodRef, deleted bool) {
	if p.NodeName == "" {
		// Unscheduled: no taint applies. Queuing it under the empty shard key
		// would pile every pending pod onto one shard for nothing; when it is
		// bound, its update (new node name) brings it here again.
		return
	}
	u := podUpdate{Namespace: p.Namespace, Name: p.Name, NodeName: p.NodeName}
	if deleted {
		u.Deleted = m.status.uidHash(p.UID)
	}
	m.dispatcher.AddLow(u)
}

// tolerationsEqual is apiequality.Semantic.DeepEqual for tolerations (nil
// and empty alike; TolerationSeconds compared by value) without reflection:
// it runs for every pod update an informer delivers, most of which (status
// changes) it filters out.
func tolerationsEqual(a, b []v1.Toleration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Key != y.Key || x.Operator != y.Operator || x.Value != y.Value || x.Effect != y.Effect {
			return false
		}
		if (x.TolerationSeconds == nil) != (y.TolerationSeconds == nil) ||
			x.TolerationSeconds != nil && *x.TolerationSeconds != *y.TolerationSeconds {
			return false
		}
	}
	return true
}

// Stats returns what the manager has done so far.
func (m *Manager) Stats() Stats {
	return Stats{
		Evicted:         m.stats.evicted.Load(),
		Deleted:         m.stats.deleted.Load(),
		EvictedByAPI:    m.stats.evictedByAPI.Load(),
		FallbackDeleted: m.stats.fallbackDeleted.Load(),
		Refused:         m.stats.refused.Load(),
		DryRun:          m.stats.dryRun.Load(),
		BudgetWaits:     m.stats.budgetWaits.Load(),
		Gone:            m.stats.gone.Load(),
		Terminating:     m.stats.terminating.Load(),
		Rescheduled:     m.stats.rescheduled.Load(),
		Dropped:         m.stats.dropped.Load(),
		Cancelled:       m.stats.cancelled.Load(),
		Failed:          m.stats.failed.Load(),
		ResyncFound:     m.stats.resyncFound.Load(),
		NodeReads:       m.stats.nodeReads.Load(),
	}
}

// Failing returns how many scheduled evictions are failing (their last
// attempts failed: see PendingEviction.FailingSince), and since when the
// one failing longest has been; zero if none.
func (m *Manager) Failing() (n int, since time.Time) { return m.status.failing() }

// ScheduledEviction returns the eviction scheduled for the pod
// namespace/name, if any: a snapshot of the eviction queue's entry.
func (m *Manager) ScheduledEviction(namespace, name string) (timedqueue.TimedWorker[types.NamespacedName], bool) {
	return m.evictions.GetWorker(types.NamespacedName{Namespace: namespace, Name: name})
}

// ScheduledEvictions returns the number of evictions scheduled, running or
// waiting for a retry.
func (m *Manager) ScheduledEvictions() int { return m.evictions.Len() }

// QueuedUpdates returns the number of node and pod updates queued and not
// yet handled: not those being handled or waiting for a retry.
func (m *Manager) QueuedUpdates() int { return m.dispatcher.Len() }

// dropped is the dispatcher's drop hook. Updates dropped at shutdown are
// expected (the next manager's informer lists everything again); others mean
// a lister kept failing.
func (m *Manager) dropped(d sharding.Drop[string, podUpdate]) {
	if errors.Is(d.Err, sharding.ErrStopped) {
		m.log.V(4).Info("Dropped update at shutdown", "node", d.High, "pod", d.Low.key())
		return
	}
	if d.Lane == sharding.LaneHigh {
		m.log.Error(d.Err, "Dropped node update", "node", d.High, "attempts", d.Attempts)
	} else {
		m.log.Error(d.Err, "Dropped pod update", "pod", d.Low.key(), "attempts", d.Attempts)
	}
}
