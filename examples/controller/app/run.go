package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
	"github.com/taintkit/taintkit/examples/controller/metricsauth"
	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
)

// Component is the controller's name: the source of its events and the
// first word of its User-Agent ([UserAgent]).
const Component = "taintkit-noexecute"

// ErrLeaderLost is returned by [Run] when this replica stopped acting
// because it lost the leader election lease. The process should exit: a
// restart starts a fresh manager, which takes its countdowns up from the
// cluster's state.
var ErrLeaderLost = errors.New("app: lost the leader election lease")

// errGraceExpired cancels the API requests still running when the
// shutdown grace period ends.
var errGraceExpired = errors.New("app: shutdown grace period expired")

// Run runs the controller until ctx is done or the lease is lost. It
// validates o (returning [Options.Validate]'s error before anything
// starts), binds the metrics and health servers, starts shared informers
// for nodes and pods with cfg's credentials (QPS and burst set from o, the
// User-Agent to [UserAgent] of o.Identity; cfg itself is not changed), and
// once their caches are synced (/readyz turns 200) runs the manager of examples/internal/manager: at once, or
// with o.LeaderElect only while this replica holds the Lease.
//
// When ctx is done Run stops the manager, lets evictions already in flight
// finish within o.ShutdownGracePeriod, releases the lease, stops the
// servers and returns nil. When the lease is lost Run stops the manager at
// once, cancelling requests in flight, and returns [ErrLeaderLost]. It
// returns other errors for what prevents it from starting.
//
// Run logs through klog.FromContext(ctx). Several Runs may share a process
// (as replicas do in tests) if their bind addresses and Registry differ.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if cfg == nil {
		return errors.New("app: nil *rest.Config")
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg.RateLimiter = nil // the flags decide, not a limiter the caller left in cfg
	cfg.UserAgent = UserAgent(o.Identity)
	fence, err := newFence(o, klog.FromContext(ctx))
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	mainCfg := rest.CopyConfig(cfg)
	if fence != nil {
		mainCfg.Wrap(fence.Wrap) // inside waitForServer: each try is checked
	}
	mainCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return waitForServer{next: rt} })
	client, err := kubernetes.NewForConfig(mainCfg)
	if err != nil {
		return fmt.Errorf("app: clientset: %w", err)
	}
	// Events have a client of their own, with its own rate limiter: in a
	// mass eviction they would otherwise queue behind the pod writes (and
	// their queues would fill and drop them; eventSink).
	ecfg := rest.CopyConfig(cfg)
	ecfg.QPS, ecfg.Burst = o.EventsQPS, o.EventsBurst
	if fence != nil {
		ecfg.Wrap(fence.Wrap)
	}
	eventsClient, err := kubernetes.NewForConfig(ecfg)
	if err != nil {
		return fmt.Errorf("app: events clientset: %w", err)
	}
	var leaderClient kubernetes.Interface
	if o.LeaderElect {
		// A client of its own, with its own rate limiter: renewals must not
		// queue behind a thousand deletions. A request may take at most half
		// the renew deadline, so one hung request cannot lose the lease; the
		// elector tries again itself, so its requests do not wait for an
		// unreachable server (waitForServer).
		lcfg := rest.CopyConfig(cfg)
		lcfg.Timeout = max(time.Second, o.RenewDeadline/2)
		lcfg.UserAgent += leaderElectionUserAgentSuffix
		if leaderClient, err = kubernetes.NewForConfig(lcfg); err != nil {
			return fmt.Errorf("app: leader election clientset: %w", err)
		}
	}
	var filter MetricsFilter
	if o.MetricsSecure && o.MetricsBindAddress != "0" {
		// TokenReviews and SubjectAccessReviews (metricsauth), on a client
		// of their own; their answers are cached (a minute for a token,
		// five for an allowed request, 30 s for a denied one).
		acfg := rest.CopyConfig(cfg)
		httpClient, err := rest.HTTPClientFor(acfg)
		if err != nil {
			return fmt.Errorf("app: metrics authentication client: %w", err)
		}
		if filter, err = metricsauth.New(acfg, httpClient); err != nil {
			return fmt.Errorf("app: metrics authentication: %w", err)
		}
	}
	return run(ctx, clients{api: client, leader: leaderClient, events: eventsClient, metricsFilter: filter, fence: fence}, o)
}

// clients are the clientsets of one Run.
type clients struct {
	api    kubernetes.Interface // informers and pod writes
	leader kubernetes.Interface // the lease; used only with Options.LeaderElect
	events kubernetes.Interface // the event sink
	// metricsFilter authenticates and authorizes the metrics server's
	// requests; used only with Options.MetricsSecure.
	metricsFilter MetricsFilter
	// fence guards api's and events' writes; used only with
	// Options.LeaderElect. Nil means one of run's own.
	fence *leasefence.Fence
}

// controller is what one Run builds.
type controller struct {
	o        Options
	log      logr.Logger
	client   kubernetes.Interface
	cluster  *cluster
	recorder record.EventRecorder
	metrics  *kube.Metrics
	pending  *EvictionsHandler // /debug/evictions
}

// readNode is the manager's read of a node from the API server, for a pod
// its cached node may wrongly evict (manager.Config.ReadNode).
func (c *controller) readNode(ctx context.Context, name string) (*v1.Node, error) {
	return c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// run is Run on given clientsets (fake ones in tests).
func run(ctx context.Context, cs clients, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	log := klog.FromContext(ctx)

	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	metrics, err := kube.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("app: register metrics: %w", err)
	}
	eventsDropped, err := newEventsDropped(reg)
	if err != nil {
		return fmt.Errorf("app: register metrics: %w", err)
	}
	watchdog := newWatchdog(o)
	pending := &EvictionsHandler{}
	srv, err := listen(o, log, reg, watchdog, pending, cs.metricsFilter)
	if err != nil {
		return err
	}
	if o.MetricsBindAddress != "0" && !o.MetricsSecure {
		log.Info("Serving /metrics and /debug/evictions over plain HTTP to anyone who can reach them (--metrics-secure=false)")
	}
	srv.serve(log)
	defer srv.shutdown(log)
	if o.Listening != nil {
		o.Listening(srv.addrs())
	}

	cl, err := newCluster(cs.api, o, log)
	if err != nil {
		return err
	}
	// The informers outlive ctx: the manager reads them while evictions in
	// flight finish.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		stopInformers()
		cl.factory.Shutdown()
	}()
	cl.factory.Start(informerCtx.Done())
	// WaitFor reacts as soon as they sync; it does not poll.
	synced := []cache.DoneChecker{cl.nodes.HasSyncedChecker(), cl.pods.HasSyncedChecker()}
	if cl.devices != nil {
		synced = append(synced, cl.devices.hasSynced()...)
	}
	if !cache.WaitFor(ctx, "informer caches", synced...) {
		log.Info("Stopped before the informer caches synced")
		return nil
	}
	srv.ready.Store(true)
	log.Info("Informer caches synced")

	events := startEventSink(informerCtx, cs.events, eventsDropped)
	defer events.shutdown()

	c := &controller{
		o:        o,
		log:      log,
		client:   cs.api,
		cluster:  cl,
		recorder: events,
		metrics:  metrics,
		pending:  pending,
	}
	if !o.LeaderElect {
		return c.runManager(ctx, nil)
	}
	return c.runElected(ctx, cs.leader, cs.fence, watchdog)
}

// runManager runs a new manager until ctx is done (then it stops it
// gracefully and returns nil) or lost is closed (then it stops it at once
// and returns ErrLeaderLost). A nil lost is never closed.
func (c *controller) runManager(ctx context.Context, lost <-chan struct{}) error {
	// acting is the context of the manager's API requests. It is not the
	// eviction's own ctx, which the manager cancels as soon as it stops:
	// a deletion in flight may finish within the grace period. It is
	// cancelled when the lease is lost or the grace period ends.
	acting, stopActing := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopActing(nil)

	// The pod client reads the informer's pods as trimmed: the
	// DisruptionTarget condition it keeps is the API server's, and the pod
	// it hands BeforeDelete has the identity and node of the server's.
	cachedPod := c.cluster.getPod
	cfg := manager.Config{
		GetNode:    c.cluster.getNode,
		GetPod:     c.cluster.getPod,
		PodsOnNode: c.cluster.podsOnNode,
		ListNodes:  c.cluster.listNodes,
		ReadNode:   c.readNode,
		Countdowns: c.cluster.countdowns,
		Client: untilStopped{
			client: &kube.PodClient{API: kube.ClientsetAPI(c.client), GetPod: cachedPod, BeforeDelete: c.o.BeforeDelete},
			stop:   acting,
		},
		Recorder:                 c.recorder,
		Logger:                   &c.log,
		Shards:                   c.o.Shards,
		MaxConcurrentEvictions:   c.o.MaxConcurrentEvictions,
		UseEvictionAPI:           c.o.UseEvictionAPI,
		EvictionFallbackAfter:    c.o.EvictionFallbackAfter,
		EvictionRate:             c.o.EvictionRate,
		EvictionBurst:            c.o.EvictionBurst,
		EvictionRatePerNamespace: c.o.EvictionRatePerNamespace,
		EvictionRetry: timedqueue.RetryPolicy{
			MaxAttempts:    timedqueue.UnlimitedAttempts,
			InitialBackoff: time.Second,
			MaxBackoff:     c.o.EvictionRetryMaxBackoff,
		},
		ResyncPeriod:      c.o.ResyncPeriod,
		DryRun:            c.o.DryRun,
		Metrics:           c.metrics,
		QueueMetrics:      c.metrics.Queue(),
		DispatcherMetrics: c.metrics.Dispatcher(),
	}
	devs := c.cluster.devices
	if devs != nil {
		// One manager for node and device taints: one decision per pod, one
		// eviction path (budgets, Eviction API, dry run, the fence).
		cfg.Devices, cfg.Evicted = devs.podDevices, devs.evicted
	}
	m, err := manager.New(cfg)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	c.metrics.SetManager(m)
	c.metrics.SetLeader(true)
	defer c.metrics.SetLeader(false)
	c.pending.SetSource(m)
	defer c.pending.SetSource(nil) // a stopped manager schedules nothing

	managerCtx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
	defer stopManager()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.Run(managerCtx)
	}()
	if devs != nil {
		// The rules' status is the leader's to write, while its manager
		// runs; the device handlers tell both of their changes from now on.
		rs := newRuleStatus(devs, c.client, c.recorder, c.log, c.o.DryRun)
		devs.setTarget(&deviceTarget{devicesChanged: m.DevicesChanged, ruleChanged: rs.add})
		for _, r := range devs.taints.Rules() {
			rs.add(r.Name)
		}
		statusDone := make(chan struct{})
		go func() {
			defer close(statusDone)
			rs.run(managerCtx)
		}()
		defer func() {
			devs.setTarget(nil)
			stopManager()
			<-statusDone
		}()
	}
	// Handlers added to running informers are first told of every object
	// in the cache, as additions: the manager starts from the whole state.
	var regs []func()
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{c.cluster.nodes, nodeHandler(m, c.log)},
		{c.cluster.pods, podHandler(m, c.log)},
	} {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			stopActing(err)
			stopManager()
			<-stopped
			return fmt.Errorf("app: add event handler: %w", err)
		}
		regs = append(regs, func() { _ = h.informer.RemoveEventHandler(reg) })
	}

	var result error
	var grace <-chan time.Time
	select {
	case <-ctx.Done():
		c.log.Info("Shutting down: stopping the manager", "gracePeriod", c.o.ShutdownGracePeriod)
		timer := time.NewTimer(c.o.ShutdownGracePeriod)
		defer timer.Stop()
		grace = timer.C
	case <-lost:
		c.log.Info("Lost the lease: stopping the manager at once")
		stopActing(ErrLeaderLost)
		lost, result = nil, ErrLeaderLost
	}
	for _, remove := range regs {
		remove()
	}
	stopManager()
	for {
		select {
		case <-stopped:
			return result
		case <-grace:
			c.log.Info("Shutdown grace period over: cancelling the requests still in flight")
			stopActing(errGraceExpired)
			grace = nil
		case <-lost:
			// Lost during the grace period: whoever leads next may act
			// already, so stop now, but this is still a shutdown.
			c.log.Info("Lost the lease while shutting down: cancelling the requests in flight")
			stopActing(ErrLeaderLost)
			lost = nil
		}
	}
}

// untilStopped runs a PodClient's requests on a context that the
// eviction's cancellation does not cancel, and stop does.
type untilStopped struct {
	client manager.PodClient
	stop   context.Context
}

func (u untilStopped) SetPodCondition(ctx context.Context, namespace, name string, uid types.UID, cond v1.PodCondition) error {
	ctx, cancel := u.context(ctx)
	defer cancel()
	return u.client.SetPodCondition(ctx, namespace, name, uid, cond)
}

func (u untilStopped) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	ctx, cancel := u.context(ctx)
	defer cancel()
	return u.client.DeletePod(ctx, namespace, name, opts)
}

// EvictPod evicts through the wrapped client, which must be a
// manager.PodEvicter (Run's PodClient is).
func (u untilStopped) EvictPod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	ctx, cancel := u.context(ctx)
	defer cancel()
	return u.client.(manager.PodEvicter).EvictPod(ctx, namespace, name, opts)
}

func (u untilStopped) context(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	if u.stop.Err() != nil {
		// Already stopped: fail now, not once AfterFunc's goroutine runs.
		cancel(context.Cause(u.stop))
		return ctx, func() {}
	}
	unhook := context.AfterFunc(u.stop, func() { cancel(context.Cause(u.stop)) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}
