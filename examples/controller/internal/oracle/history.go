package oracle

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podObs is a state of a pod as the watch delivered it, at when.
type podObs struct {
	at      time.Time
	pod     *corev1.Pod
	deleted bool // its deletion was delivered
}

// nodeObs is a state of a node; node is nil once it is deleted.
type nodeObs struct {
	at   time.Time
	node *corev1.Node
}

// history is what the watches saw, in the order they delivered it. Informers
// relist after a broken watch (an API server restarted, a watch expired),
// delivering the states they missed as updates: the times are when the
// oracle learnt of a state, never before the server had it.
type history struct {
	mu      sync.Mutex
	pods    map[types.UID][]podObs
	nodes   map[string][]nodeObs
	devices deviceHistory
	end     time.Time // when the watches stopped; zero while they run
}

func newHistory() *history {
	return &history{pods: map[types.UID][]podObs{}, nodes: map[string][]nodeObs{}, devices: newDeviceHistory()}
}

func (h *history) pod(obj any, deleted bool) {
	now := time.Now()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[p.UID] = append(h.pods[p.UID], podObs{at: now, pod: p, deleted: deleted})
}

func (h *history) node(obj any, deleted bool) {
	now := time.Now()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if deleted {
		n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		h.nodes[n.Name] = append(h.nodes[n.Name], nodeObs{at: now})
		return
	}
	h.nodes[n.Name] = append(h.nodes[n.Name], nodeObs{at: now, node: n})
}

// watch runs informers for the pods of namespace, for every node and for
// the DRA objects ([history.watchDevices]) until ctx ends, and returns once
// all have listed. done is closed when they have
// stopped.
func (h *history) watch(ctx context.Context, c kubernetes.Interface, namespace string) (done <-chan struct{}, err error) {
	_, pods := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.CoreV1().Pods(namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return c.CoreV1().Pods(namespace).Watch(ctx, o)
			},
		},
		ObjectType: &corev1.Pod{},
		Handler:    handlers(h.pod),
	})
	_, nodes := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.CoreV1().Nodes().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return c.CoreV1().Nodes().Watch(ctx, o)
			},
		},
		ObjectType: &corev1.Node{},
		Handler:    handlers(h.node),
	})
	informers := append([]cache.Controller{pods, nodes}, h.watchDevices(c, namespace)...)
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	for _, inf := range informers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf.RunWithContext(ctx)
		}()
	}
	go func() {
		wg.Wait()
		close(stopped)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return stopped, fmt.Errorf("oracle: the watches did not list: %w", context.Cause(ctx))
	}
	return stopped, nil
}

// handlers calls f with every object an informer delivers, and whether it
// was deleted.
func handlers(f func(any, bool)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f(obj, false) },
		UpdateFunc: func(_, obj any) { f(obj, false) },
		DeleteFunc: func(obj any) { f(obj, true) },
	}
}

// snapshot returns copies of the observations, and when they end.
func (h *history) snapshot() (map[types.UID][]podObs, map[string][]nodeObs, deviceHistory, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pods := make(map[types.UID][]podObs, len(h.pods))
	for k, v := range h.pods {
		pods[k] = append([]podObs(nil), v...)
	}
	nodes := make(map[string][]nodeObs, len(h.nodes))
	for k, v := range h.nodes {
		nodes[k] = append([]nodeObs(nil), v...)
	}
	end := h.end
	if end.IsZero() {
		end = time.Now()
	}
	return pods, nodes, h.devices.clone(), end
}
