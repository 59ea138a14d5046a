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

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/podcache"
)

// recorder records the calls a manager would get.
type recorder struct {
	nodes [][2]*v1.Node
	pods  [][2]*v1.Pod
}

func (r *recorder) NodeUpdated(old, new *v1.Node) { r.nodes = append(r.nodes, [2]*v1.Node{old, new}) }
func (r *recorder) PodUpdated(old, new *v1.Pod)   { r.pods = append(r.pods, [2]*v1.Pod{old, new}) }

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

// The informer delivers pods as the records it caches: the manager gets
// the pods they hold, in a tombstone too; a node handler ignores them.
func TestPodHandlerTurnsRecordsIntoPods(t *testing.T) {
	var r recorder
	var errs []string
	h := app.PodHandler(&r, errorLog(&errs))
	nodes := app.NodeHandler(&r, errorLog(&errs))
	old, pod := testPod("web", "uid-1"), testPod("web", "uid-1")
	pod.Spec.NodeName = "node-2"
	oldRec, rec := podcache.NewRecord(old), podcache.NewRecord(pod)

	h.OnAdd(rec, false)
	h.OnUpdate(oldRec, rec)
	h.OnDelete(rec)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: oldRec})
	nodes.OnDelete(rec)
	o, p := podcache.Trim(old), podcache.Trim(pod)
	assert.Equal(t, [][2]*v1.Pod{{nil, p}, {o, p}, {p, nil}, {o, nil}}, r.pods)
	assert.Len(t, errs, 1, "the node handler logs the record it cannot use: %q", errs)
	assert.Empty(t, r.nodes)
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
