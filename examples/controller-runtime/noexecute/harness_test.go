package noexecute_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/taintkit/taintkit/examples/controller-runtime/internal/testenv"
	"github.com/taintkit/taintkit/examples/controller-runtime/noexecute"
	"github.com/taintkit/taintkit/examples/controller/metricsauth"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// harness is one test's namespace on the shared API server, and an admin
// client that reads from the server, not a cache.
type harness struct {
	t   *testing.T
	ctx context.Context
	cfg *rest.Config
	c   client.WithWatch
	ns  string
}

func setup(t *testing.T, name string) *harness {
	cfg := testenv.Config(t)
	c, err := client.NewWithWatch(cfg, client.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, cfg: cfg, c: c, ns: testenv.Name(name)}
	require.NoError(t, c.Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}))
	return h
}

// replicaOptions say how a replica's manager is set up.
type replicaOptions struct {
	leaseName string                // leader election on this Lease in the test's namespace; "" runs without
	registry  prometheus.Registerer // nil: a registry of the replica's own
	metrics   string                // secure metrics server address, as main.go serves it; "" disables it
	probes    string                // health probe server address; "" disables it
	config    manager.Config
	// fenced elects through noexecute.NewLeaderFence, as main.go does.
	fenced bool
}

// replica is a controller-runtime manager running a noexecute.Runnable.
// Its client records every write to a pod.
type replica struct {
	mgr    ctrl.Manager
	fence  *noexecute.LeaderFence // with replicaOptions.fenced
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	deletes map[types.UID]time.Time // DELETEs of pods sent, by precondition UID
	writes  []string                // every write to a pod, as "verb ns/name"
}

// startReplica starts a manager with the Runnable; the test's cleanup
// stops it and waits for its Start to return.
func (h *harness) startReplica(o replicaOptions) *replica {
	t := h.t
	r := &replica{done: make(chan error, 1), deletes: map[types.UID]time.Time{}}
	metricsAddr, probeAddr := "0", "0"
	if o.metrics != "" {
		metricsAddr = o.metrics
	}
	if o.probes != "" {
		probeAddr = o.probes
	}
	opts := ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: metricsAddr, SecureServing: true,
			FilterProvider: metricsauth.NewAs[metricsserver.Filter]},
		HealthProbeBindAddress: probeAddr,
		// Two managers in one process (a leader and a standby) register
		// controllers of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, r.recorder()), nil
		},
	}
	if o.leaseName != "" {
		opts.LeaderElection = true
		opts.LeaderElectionID = o.leaseName
		opts.LeaderElectionNamespace = h.ns
		opts.LeaderElectionReleaseOnCancel = true
		opts.LeaseDuration = ptr.To(4 * time.Second)
		opts.RenewDeadline = ptr.To(3 * time.Second)
		opts.RetryPeriod = ptr.To(500 * time.Millisecond)
	}
	cfg := h.cfg
	if o.fenced {
		var err error
		r.fence, err = noexecute.NewLeaderFence(h.cfg, &opts)
		require.NoError(t, err)
		cfg = r.fence.Config
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	require.NoError(t, err)
	if r.fence != nil {
		require.NoError(t, mgr.Add(r.fence))
	}
	reg := o.registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	require.NoError(t, (&noexecute.Runnable{Config: o.config, Registry: reg}).SetupWithManager(mgr))
	require.NoError(t, mgr.AddHealthzCheck("ping", healthz.Ping))
	r.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	var serving <-chan struct{}
	if o.metrics != "" {
		serving = testenv.MetricsServing(o.metrics)
	}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	syncCtx, cancelSync := context.WithTimeout(h.ctx, time.Minute)
	defer cancelSync()
	require.True(t, mgr.GetCache().WaitForCacheSync(syncCtx), "caches never synced")
	if serving != nil {
		select {
		case <-serving:
		case <-syncCtx.Done():
			t.Fatalf("the metrics server on %s did not start within a minute", o.metrics)
		}
	}
	return r
}

// stop cancels the manager's context and waits for Start to return.
func (r *replica) stop(t *testing.T) {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			require.NoError(t, err, "manager.Start")
			close(r.done)
		}
	case <-time.After(time.Minute):
		t.Error("the manager did not stop within a minute")
	}
}

func (r *replica) recorder() interceptor.Funcs {
	record := func(verb string, obj client.Object) {
		if _, ok := obj.(*v1.Pod); !ok {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.writes = append(r.writes, verb+" "+obj.GetNamespace()+"/"+obj.GetName())
	}
	return interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*v1.Pod); ok {
				do := (&client.DeleteOptions{}).ApplyOptions(opts).AsDeleteOptions()
				if do.Preconditions != nil && do.Preconditions.UID != nil {
					r.mu.Lock()
					r.deletes[*do.Preconditions.UID] = time.Now()
					r.mu.Unlock()
				}
			}
			record("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			record("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			record("create/"+sub, obj)
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			record("patch/"+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			record("update/"+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

// deleted returns when this replica sent the DELETE of the pod with uid.
func (r *replica) deleted(uid types.UID) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.deletes[uid]
	return at, ok
}

// podWrites returns every write this replica sent to a pod.
func (r *replica) podWrites() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// noExecuteTaint returns a NoExecute taint added now, as the node
// lifecycle controller stamps it (whole seconds: what the server stores).
func noExecuteTaint(key string) v1.Taint {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return v1.Taint{Key: key, Value: "true", Effect: v1.TaintEffectNoExecute, TimeAdded: &now}
}

func (h *harness) createNode(name string) string {
	name = h.ns + "-" + name
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	require.NoError(h.t, h.c.Create(h.ctx, node))
	h.t.Cleanup(func() { _ = h.c.Delete(context.Background(), node) })
	// Admission adds node.kubernetes.io/not-ready:NoSchedule, which a node
	// lifecycle controller would remove; it evicts nothing, and stays.
	return name
}

// setTaints replaces the node's NoExecute taints with taints.
func (h *harness) setTaints(node string, taints ...v1.Taint) *v1.Node {
	var n v1.Node
	require.NoError(h.t, h.c.Get(h.ctx, client.ObjectKey{Name: node}, &n))
	kept := taints
	for _, t := range n.Spec.Taints {
		if t.Effect != v1.TaintEffectNoExecute {
			kept = append(kept, t)
		}
	}
	n.Spec.Taints = kept
	require.NoError(h.t, h.c.Update(h.ctx, &n))
	return &n
}

// createBoundPod creates a pod and binds it to node through pods/binding,
// as the scheduler does: the server sets PodScheduled, whose transition
// time (whole seconds) starts every countdown on the node.
func (h *harness) createBoundPod(name, node string, tols ...v1.Toleration) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		Spec: v1.PodSpec{
			Containers:  []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Tolerations: tols,
		},
	}
	require.NoError(h.t, h.c.Create(h.ctx, pod))
	binding := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}, Target: v1.ObjectReference{Kind: "Node", Name: node}}
	require.NoError(h.t, h.c.SubResource("binding").Create(h.ctx, pod, binding))
	require.NoError(h.t, h.c.Get(h.ctx, client.ObjectKeyFromObject(pod), pod))
	require.Equal(h.t, node, pod.Spec.NodeName)
	return pod
}

func tolerate(key string, d time.Duration) v1.Toleration {
	return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(d / time.Second))}
}

// countdownStart is when the pod's countdown under the node's taint key
// starts: the later of the taint's TimeAdded and the pod's PodScheduled.
func countdownStart(t *testing.T, node *v1.Node, key string, pod *v1.Pod) time.Time {
	var start time.Time
	for _, taint := range node.Spec.Taints {
		if taint.Key == key && taint.TimeAdded != nil {
			start = taint.TimeAdded.Time
		}
	}
	require.False(t, start.IsZero(), "taint %s has no TimeAdded", key)
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.LastTransitionTime.After(start) {
			start = c.LastTransitionTime.Time
		}
	}
	return start
}

// waitGone waits until the pod with pod's UID is being deleted or gone, and
// returns when the watch saw it.
func (h *harness) waitGone(pod *v1.Pod, timeout time.Duration) time.Time {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, timeout)
	defer cancel()
	require.NoError(h.t, testenv.WaitDeleted(ctx, h.c, &v1.PodList{}, pod), "pod %s/%s not deleted", pod.Namespace, pod.Name)
	return time.Now()
}

// requireStays fails the test if the pod is deleted within d.
func (h *harness) requireStays(pod *v1.Pod, d time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, d)
	defer cancel()
	if testenv.WaitDeleted(ctx, h.c, &v1.PodList{}, pod) == nil {
		h.t.Fatalf("pod %s/%s deleted while it had to stay", pod.Namespace, pod.Name)
	}
}

// waitEvent waits for an events.k8s.io event about the pod whose note
// contains text, and returns it.
func (h *harness) waitEvent(pod *v1.Pod, text string, timeout time.Duration) *eventsv1.Event {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, timeout)
	defer cancel()
	var found *eventsv1.Event
	err := testenv.WaitFor(ctx, h.c, &eventsv1.EventList{}, func(ev watch.Event) bool {
		if e, _ := ev.Object.(*eventsv1.Event); e != nil && e.Regarding.UID == pod.UID && strings.Contains(e.Note, text) {
			found = e
		}
		return found != nil
	}, client.InNamespace(pod.Namespace))
	require.NoError(h.t, err, "no event %q about pod %s/%s", text, pod.Namespace, pod.Name)
	return found
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
