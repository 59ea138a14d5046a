package podcache_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/taintkit/taintkit/examples/controller/podcache"
)

// A record gives back exactly the pod Trim keeps, for pods with every
// field filled at random (randfill), with the conditions a record keeps
// among them: decisions on it are then those on the full pod
// (TestTrimDecidesAsFullPod).
func TestRecordIsTrimmedPod(t *testing.T) {
	deleting := metav1.NewTime(t0)
	named := map[string]*v1.Pod{
		"empty":          {},
		"full":           fullPod("web", []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, TolerationSeconds: ptr.To[int64](5)}, {Key: "k", Operator: v1.TolerationOpExists}}, condition(v1.PodReady, v1.ConditionTrue, t0), condition(v1.PodScheduled, v1.ConditionTrue, t0), condition(v1.DisruptionTarget, "Maybe", t0)),
		"empty, not nil": {Spec: v1.PodSpec{Tolerations: []v1.Toleration{}, ResourceClaims: []v1.PodResourceClaim{}}, Status: v1.PodStatus{Conditions: []v1.PodCondition{}}},
		"deleting":       {ObjectMeta: metav1.ObjectMeta{Name: "a", DeletionTimestamp: &deleting}, TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}},
	}
	for name, pod := range named {
		assert.Equal(t, podcache.Trim(pod), podcache.NewRecord(pod).Pod(), name)
	}

	f := randfill.NewWithSeed(1).NilChance(0.3).NumElements(0, 3)
	kept := []v1.PodConditionType{v1.PodScheduled, v1.DisruptionTarget, v1.PodReady}
	statuses := []v1.ConditionStatus{v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown, "other"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		pod := &v1.Pod{}
		f.Fill(pod)
		for j := range pod.Status.Conditions {
			c := &pod.Status.Conditions[j]
			c.Type, c.Status = kept[r.IntN(len(kept))], statuses[r.IntN(len(statuses))]
		}
		want := podcache.Trim(pod)
		got := podcache.NewRecord(pod).Pod()
		require.Equal(t, want, got, "pod %d", i)
	}
}

// What a record holds, its accessors and client-go's view of it
// (meta.Accessor, which informers key objects by) say.
func TestRecordAccessors(t *testing.T) {
	deleting := metav1.NewTime(t0)
	pod := fullPod("web", nil)
	pod.DeletionTimestamp = &deleting
	r := podcache.NewRecord(pod)
	assert.Equal(t, "web", r.Name())
	assert.Equal(t, "shop", r.Namespace())
	assert.Equal(t, pod.UID, r.UID())
	assert.Equal(t, "node-a", r.NodeName())
	assert.Equal(t, "web", r.PodGroupName())
	pod.Spec.SchedulingGroup = nil
	assert.Empty(t, podcache.NewRecord(pod).PodGroupName(), "in no PodGroup")

	m, err := meta.Accessor(r)
	require.NoError(t, err)
	assert.Equal(t, "web", m.GetName())
	assert.Equal(t, "shop", m.GetNamespace())
	assert.Equal(t, pod.UID, m.GetUID())
	assert.Equal(t, "42", m.GetResourceVersion())
	assert.Equal(t, &deleting, m.GetDeletionTimestamp())
	assert.Nil(t, m.GetLabels(), "a record keeps no labels")
	m.SetName("changed")
	m.GetDeletionTimestamp().Time = t0.Add(time.Hour)
	assert.Equal(t, "web", r.Name(), "a record is never modified")
	assert.Equal(t, &deleting, r.Pod().DeletionTimestamp)

	var none *podcache.Record
	_, err = meta.Accessor(none)
	assert.Error(t, err, "a nil record is no object")
	assert.Nil(t, none.Pod())
	assert.Nil(t, podcache.NewRecord(nil))
	zero := &podcache.Record{}
	assert.Equal(t, &v1.Pod{}, zero.Pod(), "the zero record is the empty pod")
	assert.Empty(t, zero.Namespace()+zero.NodeName()+zero.PodGroupName())
}

// A record shares nothing a caller can change: not with the pod it was made
// from, not between the pods it gives.
func TestRecordSharesNothing(t *testing.T) {
	pod := fullPod("web", []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, TolerationSeconds: ptr.To[int64](5)}},
		condition(v1.PodScheduled, v1.ConditionTrue, t0))
	deleting := metav1.NewTime(t0)
	pod.DeletionTimestamp = &deleting
	r := podcache.NewRecord(pod)
	want := podcache.Trim(pod)

	*pod.Spec.Tolerations[0].TolerationSeconds = 99
	pod.Status.Conditions[0].Status = v1.ConditionFalse
	pod.DeletionTimestamp.Time = t0.Add(time.Hour)
	*pod.Spec.ResourceClaims[0].ResourceClaimName = "changed"
	*pod.Spec.SchedulingGroup.PodGroupName = "changed"
	require.Equal(t, want, r.Pod(), "the record changed with its pod")

	got := r.Pod()
	*got.Spec.Tolerations[0].TolerationSeconds = 7
	got.Spec.Tolerations[0].Key = "changed"
	got.Status.Conditions[0].Status = v1.ConditionUnknown
	got.DeletionTimestamp.Time = t0.Add(time.Hour)
	*got.Status.ResourceClaimStatuses[0].ResourceClaimName = "changed"
	*got.Spec.SchedulingGroup.PodGroupName = "changed"
	got.Status.ExtendedResourceClaimStatus.RequestMappings[0].RequestName = "changed"
	require.Equal(t, want, r.Pod(), "the record changed with a pod it gave")
}

// Transform turns pods into records and leaves everything else, a record
// included, as it is.
func TestTransform(t *testing.T) {
	pod := fullPod("web", nil)
	got, err := podcache.Transform(pod)
	require.NoError(t, err)
	r, ok := got.(*podcache.Record)
	require.True(t, ok, "a pod becomes a *Record, got %T", got)
	assert.Equal(t, podcache.Trim(pod), r.Pod())

	again, err := podcache.Transform(r)
	require.NoError(t, err)
	assert.Same(t, r, again, "a record is left as it is")
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	other, err := podcache.Transform(node)
	require.NoError(t, err)
	assert.Same(t, node, other)
}

// Records are made and read from many goroutines at once (an informer's
// and its handlers'), sharing what pods repeat.
func TestRecordConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				pod := scalePod(g*1000+i, 10)
				r := podcache.NewRecord(pod)
				if !assert.Equal(t, podcache.Trim(pod), r.Pod()) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// A cache of records holds a fraction of what a cache of trimmed pods does,
// for pods as a Deployment makes them, decoded from the API server's
// protobuf as an informer decodes them.
func TestRecordMemory(t *testing.T) {
	trimmed, records := liveBytesPerPod(t, 20000)
	t.Logf("live bytes a pod: trimmed %.0f, record %.0f (%.2f×)", trimmed, records, records/trimmed)
	assert.Less(t, records, trimmed/3, "a record must take under a third of a trimmed pod")
}

func BenchmarkRecordMemory(b *testing.B) {
	for b.Loop() {
		trimmed, records := liveBytesPerPod(b, 20000)
		b.ReportMetric(trimmed, "trimmed-B/pod")
		b.ReportMetric(records, "record-B/pod")
	}
}

func BenchmarkNewRecord(b *testing.B) {
	pod := scalePod(1, 10)
	b.ReportAllocs()
	for b.Loop() {
		podcache.NewRecord(pod)
	}
}

func BenchmarkRecordPod(b *testing.B) {
	r := podcache.NewRecord(scalePod(1, 10))
	b.ReportAllocs()
	for b.Loop() {
		r.Pod()
	}
}

// liveBytesPerPod returns the heap a pod takes, kept as Trim keeps it
// and as a record, over n pods decoded from protobuf.
func liveBytesPerPod(tb testing.TB, n int) (trimmed, records float64) {
	wire := make([][]byte, n)
	for i := range n {
		data, err := scalePod(i, n/30).Marshal()
		require.NoError(tb, err)
		wire[i] = data
	}
	measure := func(keep func(*v1.Pod) any) float64 {
		kept := make([]any, n)
		before := liveHeap()
		for i, data := range wire {
			pod := &v1.Pod{}
			require.NoError(tb, pod.Unmarshal(data))
			kept[i] = keep(pod)
		}
		after := liveHeap()
		runtime.KeepAlive(kept)
		return float64(after-before) / float64(n)
	}
	trimmed = measure(func(p *v1.Pod) any { return podcache.Trim(p) })
	records = measure(func(p *v1.Pod) any { return podcache.NewRecord(p) })
	runtime.KeepAlive(wire)
	return trimmed, records
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// scalePod is pod i of a cluster of nodes nodes as a ReplicaSet makes it
// and the API server stores it: bound, the default tolerations, scheduled.
func scalePod(i, nodes int) *v1.Pod {
	pod := fullPod(fmt.Sprintf("web-5d8f-%06d", i), []v1.Toleration{
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
	}, condition(v1.PodScheduled, v1.ConditionTrue, t0.Add(time.Duration(i)*time.Second)), condition(v1.PodReady, v1.ConditionTrue, t0))
	pod.UID = types.UID(fmt.Sprintf("d7c6a4c2-0a0e-4c36-9d1e-%012d", i))
	pod.ResourceVersion = fmt.Sprint(1000000 + i)
	pod.Spec.NodeName = fmt.Sprintf("node-%05d", i%max(nodes, 1))
	pod.Spec.SchedulingGroup, pod.Spec.ResourceClaims = nil, nil
	pod.Status.ResourceClaimStatuses, pod.Status.ExtendedResourceClaimStatus = nil, nil
	return pod
}

func ExampleRecord() {
	pod := fullPod("web", []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}})
	// An informer caches the record (informers.WithTransform(podcache.Transform));
	// a handler or a read turns it back into the pod it decides for.
	r := podcache.NewRecord(pod)
	fmt.Println(r.Namespace(), r.Name(), r.NodeName())
	trimmed := r.Pod()
	fmt.Println(len(trimmed.Spec.Tolerations), *trimmed.Spec.Tolerations[0].TolerationSeconds, len(trimmed.Spec.Containers))
	// Output:
	// shop web node-a
	// 1 60 0
}

// SameTaintInputs tells a status update from one that may change a taint
// decision, so that a handler need not turn records back into pods to
// compare them.
func TestRecordSameTaintInputs(t *testing.T) {
	base := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", ResourceVersion: "1"},
		Spec: v1.PodSpec{NodeName: "node-1", Tolerations: []v1.Toleration{
			{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
		}},
	}
	change := func(f func(p *v1.Pod)) *podcache.Record {
		p := base.DeepCopy()
		f(p)
		return podcache.NewRecord(p)
	}
	r := podcache.NewRecord(base)
	for name, tc := range map[string]struct {
		other *podcache.Record
		same  bool
	}{
		"itself":            {r, true},
		"a status update":   {change(func(p *v1.Pod) { p.ResourceVersion = "2"; p.Status.Phase = v1.PodRunning }), true},
		"another UID":       {change(func(p *v1.Pod) { p.UID = "uid-2" }), false},
		"another node":      {change(func(p *v1.Pod) { p.Spec.NodeName = "node-2" }), false},
		"longer toleration": {change(func(p *v1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = ptr.To[int64](60) }), false},
		"no toleration":     {change(func(p *v1.Pod) { p.Spec.Tolerations = nil }), false},
		"resource claims": {change(func(p *v1.Pod) {
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("web-gpu")}}
		}), false},
		"nil": {nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.same, r.SameTaintInputs(tc.other))
			assert.Equal(t, tc.same, tc.other.SameTaintInputs(r))
		})
	}
	withClaims := change(func(p *v1.Pod) {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("web-gpu")}}
	})
	assert.True(t, withClaims.HasClaims())
	assert.False(t, r.HasClaims())
	assert.False(t, withClaims.SameTaintInputs(withClaims), "records with claims are compared as pods")
}
