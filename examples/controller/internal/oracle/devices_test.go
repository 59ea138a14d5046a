package oracle

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// world is a history with DRA objects: an untainted node "n", seen at
// +5 ms, and what the test adds.
type world struct{ in input }

func newWorld() *world {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	return &world{in: input{
		namespace: "ns",
		lease:     "kube-system/l",
		pods:      map[types.UID][]podObs{},
		nodes:     map[string][]nodeObs{"n": {{at: at(5 * time.Millisecond), node: node}}},
		devices:   newDeviceHistory(),
		begin:     t0.Add(-time.Hour),
		end:       at(time.Minute),
		lost:      map[string]bool{},
		excused:   map[types.UID]bool{},
		agentUser: "sa",
	}}
}

// device returns a device of a slice with taints.
func device(name string, taints ...resourcev1.DeviceTaint) resourcev1.Device {
	return resourcev1.Device{Name: name, Taints: taints}
}

// noExecute is a NoExecute taint k=v added at d.
func noExecute(d time.Duration) resourcev1.DeviceTaint {
	return resourcev1.DeviceTaint{Key: "k", Value: "v", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &metav1.Time{Time: at(d)}}
}

// slice adds a ResourceSlice of driver "d" and pool seen at d.
func (w *world) slice(d time.Duration, name, pool string, generation int64, devices ...resourcev1.Device) {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "d",
			Pool:     resourcev1.ResourcePool{Name: pool, Generation: generation, ResourceSliceCount: 1},
			NodeName: ptr.To("n"),
			Devices:  devices,
		},
	}
	w.in.devices.slices[name] = append(w.in.devices.slices[name], obs[resourcev1.ResourceSlice]{at: at(d), obj: s})
}

// rule adds a DeviceTaintRule seen at d with taint.
func (w *world) rule(d time.Duration, name string, sel *resourcev1.DeviceTaintSelector, taint resourcev1.DeviceTaint) {
	r := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: taint},
	}
	w.in.devices.rules[name] = append(w.in.devices.rules[name], obs[resourcev1.DeviceTaintRule]{at: at(d), obj: r})
}

// pod adds a pod bound to "n" at t0 (seen at +10 ms) that uses the claim
// "claim-"+name, allocated with results and reserved for it (seen at
// +10 ms).
func (w *world) pod(name string, results ...resourcev1.DeviceRequestAllocationResult) types.UID {
	uid := types.UID("uid-" + name)
	claim := "claim-" + name
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
		Spec: corev1.PodSpec{NodeName: "n", ResourceClaims: []corev1.PodResourceClaim{
			{Name: "gpu", ResourceClaimName: &claim},
		}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0},
		}}},
	}
	w.in.pods[uid] = []podObs{{at: at(10 * time.Millisecond), pod: p}}
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: claim},
		Status: resourcev1.ResourceClaimStatus{
			Allocation:  &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: uid}},
		},
	}
	w.in.devices.claims[claim] = []obs[resourcev1.ResourceClaim]{{at: at(10 * time.Millisecond), obj: c}}
	return uid
}

// result is an allocation result of driver "d" with tolerations.
func result(pool, dev string, tolerations ...resourcev1.DeviceToleration) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: "d", Pool: pool, Device: dev, Tolerations: tolerations}
}

// tolerating is a toleration of key k (Exists) with effect and seconds.
func tolerating(effect resourcev1.DeviceTaintEffect, seconds *int64) resourcev1.DeviceToleration {
	return resourcev1.DeviceToleration{Key: "k", Operator: resourcev1.DeviceTolerationOpExists, Effect: effect, TolerationSeconds: seconds}
}

// evict adds the controller's delete of the pod at d, answered 200 after
// 50 ms, and the watch seeing it terminating 60 ms after d.
func (w *world) evict(name string, d time.Duration) {
	uid := types.UID("uid-" + name)
	w.in.requests = append(w.in.requests, Request{AuditID: "del-" + name, Kind: PodDelete, Namespace: "ns", Name: name,
		Identity: "a", User: "sa", UID: uid, Received: at(d), Completed: at(d + 50*time.Millisecond), Code: 200, HasBody: true})
	p := w.in.pods[uid][len(w.in.pods[uid])-1].pod.DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: at(d)}
	w.in.pods[uid] = append(w.in.pods[uid], podObs{at: at(d + 60*time.Millisecond), pod: p})
}

// ruleSeenAt builds an untainted device allocated to pod "p", untolerating,
// and a rule of every device added at 29.995 s and seen at d.
func ruleSeenAt(d time.Duration) func(w *world) {
	return func(w *world) {
		w.slice(0, "s1", "p1", 1, device("gpu-0"))
		w.rule(d, "r", &resourcev1.DeviceTaintSelector{}, noExecute(30*time.Second-5*time.Millisecond))
		w.pod("p", result("p1", "gpu-0"))
	}
}

func assertViolations(t *testing.T, rep *Report, want ...string) {
	t.Helper()
	if !assert.Len(t, rep.Violations, len(want), "violations: %v", rep.Violations) {
		return
	}
	for i, w := range want {
		assert.Contains(t, rep.Violations[i], w)
	}
}

func TestDeviceTaintDeadlines(t *testing.T) {
	tainted := func(w *world) { w.slice(0, "s1", "p1", 1, device("gpu-0", noExecute(0)), device("gpu-1")) }
	for name, s := range map[string]struct {
		build    func(w *world)
		evictAt  time.Duration // 0: the controller evicts nothing
		want     []string      // violations, by substring
		wantEvic int           // pods it removed that had a deadline
	}{
		"tolerating 5 s, evicted on time": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, ptr.To[int64](5))))
			},
			evictAt: 5 * time.Second, wantEvic: 1,
		},
		"tolerating 5 s, evicted early": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, ptr.To[int64](5))))
			},
			evictAt: 4900 * time.Millisecond, want: []string{"never early"}, wantEvic: 1,
		},
		"tolerating 5 s, never evicted": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, ptr.To[int64](5))))
			},
			want: []string{"never lost"},
		},
		"untolerated, evicted at once": {
			build:   func(w *world) { tainted(w); w.pod("p", result("p1", "gpu-0")) },
			evictAt: 200 * time.Millisecond, wantEvic: 1,
		},
		"an untainted device of the slice": {
			build:   func(w *world) { tainted(w); w.pod("p", result("p1", "gpu-1")) },
			evictAt: time.Second, want: []string{"never early"},
		},
		// The planted defect: a controller that ignores an empty-effect
		// toleration (as upstream's does) evicts at once.
		"an empty-effect toleration counts": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating("", ptr.To[int64](5))))
			},
			evictAt: 200 * time.Millisecond, want: []string{"never early"}, wantEvic: 1,
		},
		"an empty-effect toleration, evicted on time": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating("", ptr.To[int64](5))))
			},
			evictAt: 5 * time.Second, wantEvic: 1,
		},
		"a NoSchedule toleration does not count": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoSchedule, nil)))
			},
			evictAt: 200 * time.Millisecond, wantEvic: 1,
		},
		"tolerated for ever": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, ptr.To[int64](5)), tolerating("", nil)))
			},
			evictAt: 10 * time.Second, want: []string{"never early"},
		},
		"the smallest seconds, negative as 0": {
			build: func(w *world) {
				tainted(w)
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, ptr.To[int64](5)),
					tolerating("", ptr.To[int64](-3))))
			},
			evictAt: 200 * time.Millisecond, wantEvic: 1,
		},
		"a pod bound after the taint gets its full toleration": {
			build: func(w *world) {
				w.slice(0, "s1", "p1", 1, device("gpu-0", noExecute(-time.Hour)))
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, ptr.To[int64](5))))
			},
			evictAt: 4 * time.Second, want: []string{"never early"}, wantEvic: 1,
		},
		"a pool's older generation does not count": {
			build: func(w *world) {
				tainted(w)
				w.slice(0, "s2", "p1", 2, device("gpu-0"))
				w.pod("p", result("p1", "gpu-0"))
			},
			evictAt: time.Second, want: []string{"never early"},
		},
		"a claim reserved for another pod does not count": {
			build: func(w *world) {
				tainted(w)
				uid := w.pod("p", result("p1", "gpu-0"))
				c := w.in.devices.claims["claim-p"][0].obj
				c.Status.ReservedFor[0].UID = uid + "-old"
			},
			evictAt: time.Second, want: []string{"never early"},
		},
		"a claim made from a template, through the pod's status": {
			build: func(w *world) {
				tainted(w)
				uid := w.pod("p", result("p1", "gpu-0"))
				p := w.in.pods[uid][0].pod
				p.Spec.ResourceClaims[0] = corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}
				p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("claim-p")}}
			},
			evictAt: 200 * time.Millisecond, wantEvic: 1,
		},
		"an extended resource's claim": {
			build: func(w *world) {
				tainted(w)
				uid := w.pod("p", result("p1", "gpu-0"))
				p := w.in.pods[uid][0].pod
				p.Spec.ResourceClaims = nil
				p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "claim-p"}
			},
			evictAt: 200 * time.Millisecond, wantEvic: 1,
		},
		"the taint removed before the deadline": {
			build: func(w *world) {
				tainted(w)
				w.slice(2*time.Second, "s1", "p1", 1, device("gpu-0"), device("gpu-1"))
				w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, ptr.To[int64](5))))
			},
			evictAt: 5 * time.Second, want: []string{"never early"}, wantEvic: 1,
		},
		// The watches of different resources are separate streams: the
		// rule that made the pod due may be seen with, or just after, the
		// pod's terminating state that the eviction it caused wrote (seen
		// at 30.06 s).
		"a rule seen with the pod's terminating state": {
			build: ruleSeenAt(30*time.Second + 60*time.Millisecond), evictAt: 30 * time.Second, wantEvic: 1,
		},
		"a rule seen 0.9 s after the pod's terminating state": {
			build: ruleSeenAt(30*time.Second + 960*time.Millisecond), evictAt: 30 * time.Second, wantEvic: 1,
		},
		"a rule seen 1.1 s after the pod's terminating state": {
			build: ruleSeenAt(31*time.Second + 160*time.Millisecond), evictAt: 30 * time.Second, want: []string{"never early"},
		},
		"a rule selecting the pool, evicted at once": {
			build: func(w *world) {
				w.slice(0, "s1", "p1", 1, device("gpu-0"))
				w.rule(0, "r", &resourcev1.DeviceTaintSelector{Driver: ptr.To("d"), Pool: ptr.To("p1")}, noExecute(0))
				w.pod("p", result("p1", "gpu-0"))
			},
			evictAt: 200 * time.Millisecond, wantEvic: 1,
		},
		// The planted defect: a controller that ignores a rule's selector
		// evicts a pod on a device the rule does not select.
		"a rule selecting another pool": {
			build: func(w *world) {
				w.slice(0, "s1", "p1", 1, device("gpu-0"))
				w.rule(0, "r", &resourcev1.DeviceTaintSelector{Driver: ptr.To("d"), Pool: ptr.To("p2")}, noExecute(0))
				w.pod("p", result("p1", "gpu-0"))
			},
			evictAt: 200 * time.Millisecond, want: []string{"never early: delete ns/p uid=\"uid-p\" by \"a\" at 12:00:00.200000 (200, audit del-p) before the pod was due (from 12:00:00.010 not due;"},
		},
		"a rule selecting another device name": {
			build: func(w *world) {
				w.rule(0, "r", &resourcev1.DeviceTaintSelector{Device: ptr.To("gpu-1")}, noExecute(0))
				w.pod("p", result("p1", "gpu-0"))
			},
			evictAt: 200 * time.Millisecond, want: []string{"never early"},
		},
		"a rule with no selector selects none": {
			build: func(w *world) {
				w.rule(0, "r", nil, noExecute(0))
				w.pod("p", result("p1", "gpu-0"))
			},
			evictAt: 200 * time.Millisecond, want: []string{"never early"},
		},
		"a rule with the empty selector selects all": {
			build: func(w *world) {
				w.rule(0, "r", &resourcev1.DeviceTaintSelector{}, noExecute(0))
				w.pod("p", result("p1", "gpu-0"))
			},
			evictAt: 200 * time.Millisecond, wantEvic: 1,
		},
		"a rule's effect None evicts no one": {
			build: func(w *world) {
				taint := noExecute(0)
				taint.Effect = resourcev1.DeviceTaintEffectNone
				w.rule(0, "r", &resourcev1.DeviceTaintSelector{}, taint)
				w.pod("p", result("p1", "gpu-0"))
			},
			evictAt: 200 * time.Millisecond, want: []string{"never early"},
		},
		"a node taint and a device taint: the node's is earlier": {
			build:   func(w *world) { nodeAndDevice(w, ptr.To[int64](4), 8) },
			evictAt: 4 * time.Second, wantEvic: 1,
		},
		"a node taint and a device taint: the device's is earlier": {
			build:   func(w *world) { nodeAndDevice(w, ptr.To[int64](10), 5) },
			evictAt: 5 * time.Second, wantEvic: 1,
		},
		"a node taint and a device taint: neither is due before the earlier": {
			build:   func(w *world) { nodeAndDevice(w, ptr.To[int64](10), 5) },
			evictAt: 4500 * time.Millisecond, want: []string{"never early"}, wantEvic: 1,
		},
		"a node taint tolerated for ever does not cancel a device taint": {
			build: func(w *world) { nodeAndDevice(w, nil, 5) },
			want:  []string{"never lost"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			s.build(w)
			if s.evictAt != 0 {
				w.evict("p", s.evictAt)
			}
			rep := check(w.in)
			assertViolations(t, rep, s.want...)
			assert.Len(t, rep.Evictions, s.wantEvic, "evictions: %+v", rep.Evictions)
			for _, e := range rep.Evictions {
				assert.NotEmpty(t, e.Taint)
			}
		})
	}
}

// nodeAndDevice makes the node tainted since t0 with a taint the pod
// tolerates for nodeSeconds, and its device (of the slice "s1") tainted
// since t0 with one it tolerates for deviceSeconds.
func nodeAndDevice(w *world, nodeSeconds *int64, deviceSeconds int64) {
	n := w.in.nodes["n"][0].node
	n.Spec.Taints = []corev1.Taint{{Key: "node", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}}}
	w.slice(0, "s1", "p1", 1, device("gpu-0", noExecute(0)))
	uid := w.pod("p", result("p1", "gpu-0", tolerating(resourcev1.DeviceTaintEffectNoExecute, &deviceSeconds)))
	w.in.pods[uid][0].pod.Spec.Tolerations = []corev1.Toleration{{Key: "node", Operator: corev1.TolerationOpExists, TolerationSeconds: nodeSeconds}}
}

// The guard: a rule whose NoExecute taint would evict more pods than the
// limit makes none due while it is held.
func TestDeviceTaintRuleGuard(t *testing.T) {
	// Three pods on devices an empty-selector rule taints; one tolerates it
	// for ever, so the rule would evict two.
	build := func(limit int) *world {
		w := newWorld()
		w.in.maxPods = []maxPodsChange{{at: t0.Add(-time.Hour), n: limit}}
		w.rule(time.Second, "everything", &resourcev1.DeviceTaintSelector{}, noExecute(time.Second))
		w.pod("a", result("p1", "gpu-0"))
		w.pod("b", result("p1", "gpu-1"))
		w.pod("c", result("p1", "gpu-2", tolerating("", nil)))
		return w
	}
	t.Run("within the limit", func(t *testing.T) {
		w := build(2)
		w.evict("a", 1200*time.Millisecond)
		w.evict("b", 1300*time.Millisecond)
		rep := check(w.in)
		assertViolations(t, rep)
		assert.Len(t, rep.Evictions, 2)
		assert.Empty(t, rep.HeldRules)
	})
	t.Run("held: nothing evicted, nothing lost", func(t *testing.T) {
		rep := check(build(1).in)
		assertViolations(t, rep)
		assert.Equal(t, []string{"rule everything held from 12:00:01.000 (2 pods over a limit of 1) to the end"}, rep.HeldRules)
	})
	t.Run("no limit", func(t *testing.T) {
		rep := check(build(0).in)
		assertViolations(t, rep, "never lost", "never lost")
		assert.Empty(t, rep.HeldRules)
	})
	// The planted defect: the guard off, the held rule's pods evicted.
	t.Run("held, evicted", func(t *testing.T) {
		w := build(1)
		w.evict("a", 1200*time.Millisecond)
		w.evict("b", 1300*time.Millisecond)
		rep := check(w.in)
		assertViolations(t, rep, "never early", "never early")
	})
	t.Run("held, then released by a higher limit", func(t *testing.T) {
		w := build(1)
		w.in.maxPods = append(w.in.maxPods, maxPodsChange{at: at(10 * time.Second), n: 5})
		w.evict("a", 10200*time.Millisecond)
		rep := check(w.in)
		// b, due since the release, is lost.
		assertViolations(t, rep, "never lost: pod ns/b (uid uid-b) due since 12:00:10.000")
		assert.Len(t, rep.Evictions, 1)
		assert.Equal(t, []string{"rule everything held from 12:00:01.000 (2 pods over a limit of 1) to 12:00:10.000"}, rep.HeldRules)
	})
	t.Run("released by narrowing the rule", func(t *testing.T) {
		w := build(1)
		w.rule(5*time.Second, "everything", &resourcev1.DeviceTaintSelector{Device: ptr.To("gpu-0")}, noExecute(time.Second))
		w.evict("a", 5100*time.Millisecond)
		rep := check(w.in)
		assertViolations(t, rep)
		assert.Len(t, rep.Evictions, 1)
	})
	t.Run("a slice's taints are not guarded", func(t *testing.T) {
		w := build(1)
		w.slice(0, "s1", "p1", 1, device("gpu-0", noExecute(0)))
		w.evict("a", 200*time.Millisecond)
		rep := check(w.in)
		assertViolations(t, rep)
		assert.Len(t, rep.Evictions, 1)
		assert.True(t, strings.Contains(rep.Evictions[0].Taint, "its slice"), rep.Evictions[0].Taint)
	})
}

func TestRuleStatusOneWriter(t *testing.T) {
	w := newWorld()
	status := func(id string, d time.Duration) Request {
		return Request{AuditID: "s" + d.String(), Kind: RuleStatus, Verb: "patch", Name: "r", Identity: id, User: "sa",
			Received: at(d), Completed: at(d + time.Millisecond), Code: 200}
	}
	w.in.requests = []Request{lease("a", 0), status("a", time.Second), lease("b", 2*time.Second), status("a", 3*time.Second)}
	rep := check(w.in)
	assertViolations(t, rep, "one writer: rule-status /r")
	assert.Equal(t, 2, rep.Writes[RuleStatus])
}

func TestTolerates(t *testing.T) {
	taint := resourcev1.DeviceTaint{Key: "k", Value: "v", Effect: resourcev1.DeviceTaintEffectNoExecute}
	for _, c := range []struct {
		tol  resourcev1.DeviceToleration
		want bool
	}{
		{resourcev1.DeviceToleration{Operator: resourcev1.DeviceTolerationOpExists}, true},
		{resourcev1.DeviceToleration{Key: "k", Operator: resourcev1.DeviceTolerationOpExists}, true},
		{resourcev1.DeviceToleration{Key: "other", Operator: resourcev1.DeviceTolerationOpExists}, false},
		{resourcev1.DeviceToleration{Key: "k", Value: "v"}, true},
		{resourcev1.DeviceToleration{Key: "k", Operator: resourcev1.DeviceTolerationOpEqual, Value: "v"}, true},
		{resourcev1.DeviceToleration{Key: "k", Operator: resourcev1.DeviceTolerationOpEqual, Value: "w"}, false},
		{resourcev1.DeviceToleration{Key: "k", Value: "v", Effect: resourcev1.DeviceTaintEffectNoExecute}, true},
		{resourcev1.DeviceToleration{Key: "k", Value: "v", Effect: resourcev1.DeviceTaintEffectNoSchedule}, false},
		{resourcev1.DeviceToleration{Key: "k", Operator: "Gt", Value: "v"}, false},
		{resourcev1.DeviceToleration{Value: "v"}, true}, // empty key, Equal: the value decides
	} {
		assert.Equal(t, c.want, tolerates(&c.tol, &taint), "%+v", c.tol)
	}
}
