package app_test

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/podcache"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// recorder records the calls a manager would get.
type recorder struct {
	nodes   [][2]*v1.Node
	pods    [][2]*v1.Pod
	changed []changed
}

type changed struct {
	ref     manager.PodRef
	deleted bool
}

func (r *recorder) NodeUpdated(old, new *v1.Node) { r.nodes = append(r.nodes, [2]*v1.Node{old, new}) }
func (r *recorder) PodUpdated(old, new *v1.Pod)   { r.pods = append(r.pods, [2]*v1.Pod{old, new}) }
func (r *recorder) PodChanged(p manager.PodRef, deleted bool) {
	r.changed = append(r.changed, changed{p, deleted})
}

func errorLog(errs *[]string) logr.Logger {
	return funcr.New(func(prefix, args string) { *errs = append(*errs, args) }, funcr.Options{})
}

func TestPodHandler(t *testing.T) {
	var r recorder
	var errs []string
	h := app.PodHandler(&r, errorLog(&errs))
	old, pod := testPod("web", "uid-1"), testPod("web", "uid-1")
	pod.Spec.NodeName = "node-2"

	h.OnAdd(pod, false)
	h.OnUpdate(old, pod)
	h.OnDelete(pod)
	// The informer missed the deletion and found the pod gone on relist:
	// the last state it knew comes in a tombstone.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: old})
	assert.Equal(t, [][2]*v1.Pod{{nil, pod}, {old, pod}, {pod, nil}, {old, nil}}, r.pods)
	assert.Empty(t, errs)
	assert.Empty(t, r.nodes)
}

// The informer delivers pods as the records it caches: the manager is told
// which pod changed, without the pod (it reads the pod when it decides),
// for a tombstone too; an update that changes nothing a decision reads (a
// status update) is not passed on; a node handler ignores records.
func TestPodHandlerNamesRecordsWithoutPods(t *testing.T) {
	var r recorder
	var errs []string
	h := app.PodHandler(&r, errorLog(&errs))
	nodes := app.NodeHandler(&r, errorLog(&errs))
	pending, bound := testPod("web", "uid-1"), testPod("web", "uid-1")
	bound.Spec.NodeName = "node-2"
	running := bound.DeepCopy()
	running.Status.Phase = v1.PodRunning
	tolerating := running.DeepCopy()
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	rec := podcache.NewRecord

	h.OnAdd(rec(pending), false)
	h.OnUpdate(rec(pending), rec(bound))      // bound: passed on
	h.OnUpdate(rec(bound), rec(running))      // a status update: dropped
	h.OnUpdate(rec(running), rec(tolerating)) // tolerations changed: passed on
	h.OnDelete(rec(tolerating))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: rec(bound)})
	nodes.OnDelete(rec(bound))

	ref := func(p *v1.Pod) manager.PodRef {
		return manager.PodRef{Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, UID: p.UID}
	}
	assert.Equal(t, []changed{
		{ref(pending), false}, {ref(bound), false}, {ref(tolerating), false},
		{ref(tolerating), true}, {ref(bound), true},
	}, r.changed)
	assert.Empty(t, r.pods)
	assert.Len(t, errs, 1, "the node handler logs the record it cannot use: %q", errs)
	assert.Empty(t, r.nodes)
}

// A record with resource claims goes to the manager as its pod, which
// compares the claims (a device taint's decision reads them).
func TestPodHandlerComparesClaimsAsPods(t *testing.T) {
	var r recorder
	var errs []string
	h := app.PodHandler(&r, errorLog(&errs))
	old := testPod("web", "uid-1")
	old.Spec.NodeName = "node-2"
	old.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("web-gpu")}}
	pod := old.DeepCopy()
	pod.Status.Phase = v1.PodRunning

	h.OnUpdate(podcache.NewRecord(old), podcache.NewRecord(pod))
	assert.Equal(t, [][2]*v1.Pod{{podcache.Trim(old), podcache.Trim(pod)}}, r.pods)
	assert.Empty(t, r.changed)
	assert.Empty(t, errs)
}

func TestNodeHandler(t *testing.T) {
	var r recorder
	var errs []string
	h := app.NodeHandler(&r, errorLog(&errs))
	old := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	node := old.DeepCopy()
	node.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoExecute}}

	h.OnAdd(node, false)
	h.OnUpdate(old, node)
	h.OnDelete(node)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "node-1", Obj: node})
	assert.Equal(t, [][2]*v1.Node{{nil, node}, {old, node}, {node, nil}, {node, nil}}, r.nodes)
	assert.Empty(t, errs)
	assert.Empty(t, r.pods)
}

// An object of another type, bare or in a tombstone, is logged and
// ignored: it never reaches the manager and never panics.
func TestHandlersIgnoreUnexpectedObjects(t *testing.T) {
	var r recorder
	var errs []string
	pods := app.PodHandler(&r, errorLog(&errs))
	nodes := app.NodeHandler(&r, errorLog(&errs))
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	pod := testPod("web", "uid-1")

	pods.OnDelete(node)
	pods.OnDelete(cache.DeletedFinalStateUnknown{Key: "node-1", Obj: node})
	pods.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web"})
	nodes.OnDelete(pod)
	nodes.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: pod})
	pods.OnAdd("not a pod", false)
	nodes.OnUpdate(pod, pod)

	assert.Empty(t, r.pods)
	assert.Empty(t, r.nodes)
	assert.Len(t, errs, 5, "each unexpected delete is logged: %q", errs)
}

// The informers cache a pod as a podcache.Record, which gives back the pod
// podcache.Trim keeps, and a node whole but for its
// managedFields.
func TestTrimCachesWhatTheControllerReads(t *testing.T) {
	pod := testPod("web", "uid-1")
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.Containers = []v1.Container{{Name: "web", Image: "web:1"}}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	got, err := app.Trim(pod)
	assert.NoError(t, err)
	require.IsType(t, &podcache.Record{}, got)
	assert.Equal(t, podcache.Trim(pod), got.(*podcache.Record).Pod())
	again, err := app.Trim(got)
	assert.NoError(t, err)
	assert.Same(t, got, again, "the transform is idempotent")

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"zone": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	want := node.DeepCopy()
	want.ManagedFields = nil
	got, err = app.Trim(node)
	assert.NoError(t, err)
	assert.Equal(t, want, got)
}
