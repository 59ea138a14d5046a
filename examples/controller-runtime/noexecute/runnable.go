package noexecute

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubecr"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/tolerations"
)

// DefaultName is the default of [Runnable.Name].
const DefaultName = "taintkit-noexecute"

// NodeNameField is the pod field index [Runnable.SetupWithManager]
// registers on the manager's cache, and PodsOnNode reads.
const NodeNameField = "spec.nodeName"

// DebugEvictionsPath is where the metrics server serves the scheduled
// evictions, behind the metrics server's filter.
const DebugEvictionsPath = "/debug/evictions"

var (
	_ ctrlmanager.Runnable               = (*Runnable)(nil)
	_ ctrlmanager.LeaderElectionRunnable = (*Runnable)(nil)
)

// Runnable runs the NoExecute taint manager of examples/internal/manager
// in a controller-runtime manager, only while that manager leads. Set its
// fields, then call SetupWithManager once, before the manager starts;
// controller-runtime calls Start once the caches have synced and this
// replica leads.
type Runnable struct {
	// Config holds the taint manager's settings (Shards,
	// MaxConcurrentEvictions, DryRun, UseEvictionAPI, eviction budget,
	// Clock, Matcher, …). SetupWithManager sets its lookups, Countdowns,
	// Client, Recorder, Logger and metrics: values given for those are
	// replaced.
	Config manager.Config
	// Registry is where the metrics are registered. Nil means
	// controller-runtime's metrics.Registry, which the manager's metrics
	// server serves.
	Registry prometheus.Registerer
	// Name names the events' reporting controller, the readiness check and
	// the logger. Empty means DefaultName.
	Name string

	m           *manager.Manager
	countdowns  *tolerations.Countdowns
	metrics     *kube.Metrics
	nodes, pods cache.Informer
	reader      client.Reader
	log         logr.Logger
}

// SetupWithManager wires r into mgr: a spec.nodeName index on pods in
// mgr's cache, informers for nodes and pods (started with the cache, on
// every replica) whose handlers feed the countdowns' memory from the start,
// leading or not, the metrics, a readiness check that passes once both
// informers have synced, DebugEvictionsPath on the metrics server, and r
// itself as a Runnable that needs leader election.
func (r *Runnable) SetupWithManager(mgr ctrlmanager.Manager) error {
	ctx := context.Background() // nothing waits here: the cache has not started
	if r.Name == "" {
		r.Name = DefaultName
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1.Pod{}, NodeNameField, func(o client.Object) []string {
		if pod, ok := o.(*v1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("noexecute: index pods by %s: %w", NodeNameField, err)
	}
	var err error
	if r.nodes, err = mgr.GetCache().GetInformer(ctx, &v1.Node{}); err != nil {
		return fmt.Errorf("noexecute: node informer: %w", err)
	}
	if r.pods, err = mgr.GetCache().GetInformer(ctx, &v1.Pod{}); err != nil {
		return fmt.Errorf("noexecute: pod informer: %w", err)
	}
	r.reader = mgr.GetCache()
	log := mgr.GetLogger()
	r.log = log
	reg := r.Registry
	if reg == nil {
		reg = crmetrics.Registry
	}
	if r.metrics, err = kube.NewMetrics(reg); err != nil {
		return fmt.Errorf("noexecute: register metrics: %w", err)
	}
	cfg := r.Config
	cfg.GetNode, cfg.GetPod, cfg.PodsOnNode = r.getNode, r.getPod, r.podsOnNode
	if cfg.ListNodes == nil {
		cfg.ListNodes = r.listNodes // the resync: nothing missed stays missed
	}
	if cfg.ReadNode == nil {
		api := mgr.GetAPIReader()
		cfg.ReadNode = func(ctx context.Context, name string) (*v1.Node, error) {
			node := &v1.Node{}
			if err := api.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
				return nil, err
			}
			return node, nil
		}
	}
	r.countdowns = tolerations.NewCountdowns(cfg.Clock, cfg.Matcher)
	cfg.Countdowns = r.countdowns
	// Fed on every replica from the informers' start, so that a standby
	// that takes over ends each countdown when the old leader would have.
	if _, err := r.nodes.AddEventHandler(handler(r.observeNode)); err != nil {
		return fmt.Errorf("noexecute: add node handler: %w", err)
	}
	if _, err := r.pods.AddEventHandler(handler(r.observePod)); err != nil {
		return fmt.Errorf("noexecute: add pod handler: %w", err)
	}
	cfg.Client = &kube.PodClient{API: kubecr.PodAPI(mgr.GetClient()), GetPod: r.getPod}
	cfg.Recorder = eventRecorder{mgr.GetEventRecorder(r.Name)}
	cfg.Logger = &log
	cfg.Metrics, cfg.QueueMetrics, cfg.DispatcherMetrics = r.metrics, r.metrics.Queue(), r.metrics.Dispatcher()
	if r.m, err = manager.New(cfg); err != nil {
		return fmt.Errorf("noexecute: %w", err)
	}
	r.metrics.SetManager(r.m)
	if err := mgr.AddReadyzCheck(r.Name, func(*http.Request) error {
		if !r.nodes.HasSynced() || !r.pods.HasSynced() {
			return errors.New("node and pod informers not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("noexecute: readiness check: %w", err)
	}
	if err := mgr.AddMetricsServerExtraHandler(DebugEvictionsPath, evictionsHandler{r.m}); err != nil {
		return fmt.Errorf("noexecute: %s: %w", DebugEvictionsPath, err)
	}
	return mgr.Add(r)
}

// NeedLeaderElection reports true: only the leader evicts.
func (r *Runnable) NeedLeaderElection() bool { return true }

// Start runs the taint manager until ctx is done, which controller-runtime
// does when this replica stops or loses the lease. The informers, already
// synced, first tell it of every node and pod as additions: it starts from
// the cluster's state, and deadlines come from the objects (taints'
// TimeAdded, pods' PodScheduled) and from what the countdowns remembered
// while this replica stood by (first sights, deadlines kept), so a new
// leader ends each countdown when the old one would have. When ctx is done,
// scheduled evictions are dropped and those in flight cancelled; Start
// returns once they have returned.
func (r *Runnable) Start(ctx context.Context) error {
	r.metrics.SetLeader(true)
	defer r.metrics.SetLeader(false)
	ctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.m.Run(ctx)
	}()
	defer func() {
		stop() // on an error below; otherwise ctx is done already
		<-stopped
	}()
	for _, h := range []struct {
		informer cache.Informer
		handler  toolscache.ResourceEventHandler
	}{{r.nodes, handler(r.m.NodeUpdated)}, {r.pods, handler(r.m.PodUpdated)}} {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return fmt.Errorf("noexecute: add event handler: %w", err)
		}
		defer func() { _ = h.informer.RemoveEventHandler(reg) }()
	}
	<-ctx.Done()
	return nil
}

// handler turns an informer's events into calls of update (a Manager's
// NodeUpdated or PodUpdated): old is nil for an addition, new for a
// deletion, whose object may come in a tombstone.
func handler[T runtime.Object](update func(old, new T)) toolscache.ResourceEventHandler {
	var none T
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				update(none, o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(T)
			o, ok2 := newObj.(T)
			if ok1 && ok2 {
				update(old, o)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(T); ok {
				update(o, none)
			}
		},
	}
}

// observeNode feeds a node's event to the countdowns, and its pods' when
// its NoExecute taints changed. The pods are listed from the cache, which
// waits for the pod informer to sync.
func (r *Runnable) observeNode(old, node *v1.Node) {
	if node == nil {
		r.countdowns.ForgetNode(old.Name)
		return
	}
	if !r.countdowns.ObserveNode(node) {
		return
	}
	pods, err := r.podsOnNode(node.Name)
	if err != nil {
		r.log.Error(err, "Listing a node's pods for the countdowns", "node", node.Name)
		return
	}
	for _, pod := range pods {
		r.countdowns.ObservePod(pod)
	}
}

// observePod feeds a pod's event to the countdowns.
func (r *Runnable) observePod(old, pod *v1.Pod) {
	if pod == nil {
		r.countdowns.ObservePodDeleted(old)
		return
	}
	r.countdowns.ObservePod(pod)
}

func (r *Runnable) getNode(name string) (*v1.Node, error) {
	node := &v1.Node{}
	if err := r.reader.Get(context.Background(), client.ObjectKey{Name: name}, node, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return node, nil
}

func (r *Runnable) listNodes() ([]*v1.Node, error) {
	var list v1.NodeList
	if err := r.reader.List(context.Background(), &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	nodes := make([]*v1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	return nodes, nil
}

func (r *Runnable) getPod(namespace, name string) (*v1.Pod, error) {
	pod := &v1.Pod{}
	if err := r.reader.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, pod, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return pod, nil
}

func (r *Runnable) podsOnNode(name string) ([]*v1.Pod, error) {
	var list v1.PodList
	if err := r.reader.List(context.Background(), &list, client.MatchingFields{NodeNameField: name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// eventRecorder records the manager's events through controller-runtime's
// events.k8s.io recorder. That API merges events of one object, reason and
// action into a series that keeps the first note, so each kind of event
// (told by its note's first word) gets an action of its own.
type eventRecorder struct{ r recorder.EventRecorder }

var actions = map[string]string{"Scheduled": "ScheduleDeletion", "Cancelling": "CancelDeletion", "Marking": "Delete",
	"Would": "DryRun", "Eviction": "Evict", "Deleting": "FallbackDelete", "Failing": "RetryDelete"}

func (e eventRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	first, _, _ := strings.Cut(messageFmt, " ")
	action, ok := actions[first]
	if !ok {
		action = reason
	}
	e.r.Eventf(obj, nil, eventtype, reason, action, messageFmt, args...)
}
