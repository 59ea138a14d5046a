package oracle

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptrSeconds(s int64) *int64 { return &s }

// scenario is a history: a node tainted at t0 (TimeAdded t0 unless untimed)
// and one pod on it, bound at t0, tolerating the taint for tol seconds (nil:
// not at all).
type scenario struct {
	untimed   bool
	tol       *int64
	extra     func(in *input) // changes to the history
	requests  []Request
	faults    []FaultWindow
	lost      []string
	end       time.Duration
	wantViol  []string // substrings, one per violation, in order
	wantEvict int      // pods the controller removed, early, on time or late
}

const uid = types.UID("uid-1")

func (s scenario) input() input {
	taint := corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoExecute}
	if !s.untimed {
		taint.TimeAdded = &metav1.Time{Time: t0}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: uid},
		Spec:       corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0},
		}}},
	}
	if s.tol != nil {
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: s.tol}}
	}
	if s.untimed {
		pod.Status.Conditions = nil
	}
	end := s.end
	if end == 0 {
		end = time.Minute
	}
	in := input{
		namespace: "ns",
		lease:     "kube-system/l",
		requests:  s.requests,
		pods:      map[types.UID][]podObs{uid: {{at: at(10 * time.Millisecond), pod: pod}}},
		nodes:     map[string][]nodeObs{"n": {{at: at(5 * time.Millisecond), node: node}}},
		begin:     t0.Add(-time.Hour),
		end:       at(end),
		faults:    s.faults,
		lost:      map[string]bool{},
		excused:   map[types.UID]bool{},
		agentUser: "sa",
	}
	for _, id := range s.lost {
		in.lost[id] = true
	}
	if s.extra != nil {
		s.extra(&in)
	}
	return in
}

// deleted returns the controller's delete of the pod by identity a,
// received at d and answered code 50 ms later, with the pod's UID as
// precondition, and the watch seeing the pod terminating then.
func deleted(in *input, d time.Duration, code int) {
	if code == 200 {
		p := in.pods[uid][0].pod.DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: at(d)}
		in.pods[uid] = append(in.pods[uid], podObs{at: at(d + 60*time.Millisecond), pod: p})
	}
}

func del(id string, d time.Duration, code int) Request {
	return Request{AuditID: id, Kind: PodDelete, Namespace: "ns", Name: "p", Identity: "a", User: "sa", UID: uid,
		Received: at(d), Completed: at(d + 50*time.Millisecond), Code: code, HasBody: true}
}

func lease(id string, d time.Duration) Request {
	return Request{AuditID: "l" + id + d.String(), Kind: LeaseWrite, Namespace: "kube-system", Name: "l", Identity: id,
		Received: at(d), Completed: at(d + time.Millisecond), Code: 200}
}

// refreshed adds the node's taint refreshed in place at d: the same key
// and effect, TimeAdded d.
func refreshed(in *input, d time.Duration) {
	n := in.nodes["n"][0].node.DeepCopy()
	n.Spec.Taints[0].TimeAdded = &metav1.Time{Time: at(d)}
	in.nodes["n"] = append(in.nodes["n"], nodeObs{at: at(d), node: n})
}

// flapped removes the node's taint at d and adds it again at back, with
// TimeAdded back.
func flapped(in *input, d, back time.Duration) {
	untainted(in, d)
	refreshed(in, back)
}

// tolerateOther adds to the pod at d a toleration of another taint: a
// state of its own, with the same deadline.
func tolerateOther(in *input, d time.Duration) {
	p := in.pods[uid][len(in.pods[uid])-1].pod.DeepCopy()
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists})
	in.pods[uid] = append(in.pods[uid], podObs{at: at(d), pod: p})
}

// untainted removes the node's taint at d.
func untainted(in *input, d time.Duration) {
	n := in.nodes["n"][0].node.DeepCopy()
	n.Spec.Taints = nil
	in.nodes["n"] = append(in.nodes["n"], nodeObs{at: at(d), node: n})
}

func TestCheck(t *testing.T) {
	for name, s := range map[string]scenario{
		"flapped, deleted at the first countdown's end": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 5*time.Second, 200)},
			extra: func(in *input) {
				flapped(in, 2*time.Second, 2200*time.Millisecond)
				deleted(in, 5*time.Second, 200)
			},
			wantViol:  []string{"never early"},
			wantEvict: 1,
		},
		"flapped, deleted at the second countdown's end": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 7200*time.Millisecond, 200)},
			extra: func(in *input) {
				flapped(in, 2*time.Second, 2200*time.Millisecond)
				deleted(in, 7200*time.Millisecond, 200)
			},
			wantEvict: 1,
		},
		// A restarted API server's watchers relist: a taint that left and
		// came back meanwhile is, to them, a taint refreshed in place.
		"flapped while the API server was away, deleted at the first countdown's end": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 5*time.Second, 200)},
			faults:   []FaultWindow{{Name: "restart", Start: at(time.Second), End: at(1500 * time.Millisecond)}},
			extra: func(in *input) {
				flapped(in, 2*time.Second, 2200*time.Millisecond)
				deleted(in, 5*time.Second, 200)
			},
			wantEvict: 1,
		},
		"flapped while the API server was away, deleted at the second countdown's end": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 7200*time.Millisecond, 200)},
			faults:   []FaultWindow{{Name: "restart", Start: at(time.Second), End: at(1500 * time.Millisecond)}},
			extra: func(in *input) {
				flapped(in, 2*time.Second, 2200*time.Millisecond)
				deleted(in, 7200*time.Millisecond, 200)
			},
			wantEvict: 1,
		},
		"flapped while requests were slowed, deleted at the first countdown's end": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 5*time.Second, 200)},
			faults:   []FaultWindow{{Name: "slow", Start: at(time.Second), End: at(3 * time.Second), Slowness: time.Second}},
			extra: func(in *input) {
				flapped(in, 2*time.Second, 2200*time.Millisecond)
				deleted(in, 5*time.Second, 200)
			},
			wantViol:  []string{"never early"},
			wantEvict: 1,
		},
		"flapped long after the API server was back, deleted at the first countdown's end": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 5*time.Second, 200)},
			faults:   []FaultWindow{{Name: "restart", Start: at(-10 * time.Second), End: at(-8 * time.Second)}},
			extra: func(in *input) {
				flapped(in, 2*time.Second, 2200*time.Millisecond)
				deleted(in, 5*time.Second, 200)
			},
			wantViol:  []string{"never early"},
			wantEvict: 1,
		},
		"refreshed in place, deleted at its first TimeAdded's deadline": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 5*time.Second, 200)},
			extra: func(in *input) {
				refreshed(in, 2*time.Second)
				deleted(in, 5*time.Second, 200)
			},
			wantEvict: 1,
		},
		"refreshed in place, deleted at the refreshed TimeAdded's deadline": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 7500*time.Millisecond, 200)},
			extra: func(in *input) {
				refreshed(in, 2500*time.Millisecond)
				deleted(in, 7500*time.Millisecond, 200)
			},
			wantViol:  []string{"never lost"},
			wantEvict: 1,
		},
		"refreshed in place before the leader started watching": {
			tol:      ptrSeconds(5),
			requests: []Request{lease("a", 3*time.Second), del("d1", 7500*time.Millisecond, 200)},
			extra: func(in *input) {
				refreshed(in, 2500*time.Millisecond)
				deleted(in, 7500*time.Millisecond, 200)
				in.started = map[string]time.Time{"a": at(2600 * time.Millisecond)}
			},
			wantEvict: 1,
		},
		"untimed, first seen before the leader started watching": {
			untimed:  true,
			tol:      ptrSeconds(5),
			requests: []Request{lease("a", 3*time.Second), del("d1", 9*time.Second, 200)},
			extra: func(in *input) {
				deleted(in, 9*time.Second, 200)
				in.started = map[string]time.Time{"a": at(3 * time.Second)}
			},
			wantEvict: 1,
		},
		"untimed, first seen after the leader started watching": {
			untimed:  true,
			tol:      ptrSeconds(5),
			requests: []Request{lease("a", 3*time.Second), del("d1", 9*time.Second, 200)},
			extra: func(in *input) {
				deleted(in, 9*time.Second, 200)
				in.started = map[string]time.Time{"a": t0.Add(-time.Second)}
			},
			wantViol:  []string{"never lost"},
			wantEvict: 1,
		},
		"deleted at the deadline": {
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 5*time.Second, 200)},
			extra:     func(in *input) { deleted(in, 5*time.Second, 200) },
			wantEvict: 1,
		},
		"deleted before the deadline": {
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 4900*time.Millisecond, 200)},
			extra:     func(in *input) { deleted(in, 4900*time.Millisecond, 200) },
			wantViol:  []string{"never early"},
			wantEvict: 1,
		},
		"no UID precondition": {
			requests:  []Request{func() Request { r := del("d1", time.Second, 200); r.UID = ""; return r }()},
			extra:     func(in *input) { deleted(in, time.Second, 200) },
			wantViol:  []string{"no UID precondition"},
			wantEvict: 1,
		},
		"never deleted": {
			tol:      ptrSeconds(5),
			wantViol: []string{"never lost"},
		},
		"deleted 3 s late": {
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 8*time.Second, 200)},
			extra:     func(in *input) { deleted(in, 8*time.Second, 200) },
			wantViol:  []string{"never lost"},
			wantEvict: 1,
		},
		"deleted 3 s late after a fault": {
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 8*time.Second, 200)},
			extra:     func(in *input) { deleted(in, 8*time.Second, 200) },
			faults:    []FaultWindow{{Name: "outage", Start: at(4 * time.Second), End: at(6 * time.Second)}},
			wantEvict: 1,
		},
		// Due from its deadline through a fault that refused its deletion,
		// with the pod changed after the fault (a state of its own, due
		// still) and the taint gone before the fault's allowance ran out:
		// the pod has been due since its deadline, and the fault covers it.
		"due through a fault and a change after it, the taint gone within the fault's allowance": {
			tol:    ptrSeconds(5),
			faults: []FaultWindow{{Name: "refusals", Start: at(4 * time.Second), End: at(6 * time.Second), After: 30 * time.Second}},
			extra: func(in *input) {
				tolerateOther(in, 10*time.Second)
				untainted(in, 20*time.Second)
			},
		},
		"due through a fault and a change after it, never deleted": {
			tol:      ptrSeconds(5),
			faults:   []FaultWindow{{Name: "refusals", Start: at(4 * time.Second), End: at(6 * time.Second), After: 30 * time.Second}},
			extra:    func(in *input) { tolerateOther(in, 10*time.Second) },
			wantViol: []string{"never lost"},
		},
		"deleted 3 s late while slowed by 2 s": {
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 8*time.Second, 200)},
			extra:     func(in *input) { deleted(in, 8*time.Second, 200) },
			faults:    []FaultWindow{{Name: "slow", Start: at(4 * time.Second), End: at(6 * time.Second), Slowness: 2 * time.Second}},
			wantEvict: 1,
		},
		"deleted 5 s late while slowed by 2 s": {
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 10*time.Second, 200)},
			extra:     func(in *input) { deleted(in, 10*time.Second, 200) },
			faults:    []FaultWindow{{Name: "slow", Start: at(4 * time.Second), End: at(6 * time.Second), Slowness: 2 * time.Second}},
			wantViol:  []string{"never lost"},
			wantEvict: 1,
		},
		"the test ends before the bound": {
			tol: ptrSeconds(5),
			end: 6 * time.Second,
		},
		"retried after a refusal": {
			requests:  []Request{del("d1", 500*time.Millisecond, 500), del("d2", time.Second, 200)},
			extra:     func(in *input) { deleted(in, time.Second, 200) },
			wantEvict: 1,
		},
		"retried after an answer": {
			requests:  []Request{del("d1", time.Second, 200), del("d2", 2*time.Second, 200)},
			extra:     func(in *input) { deleted(in, time.Second, 200) },
			wantViol:  []string{"never twice"},
			wantEvict: 1,
		},
		"retried after a lost answer": {
			requests:  []Request{del("d1", time.Second, 200), del("d2", 2*time.Second, 200)},
			extra:     func(in *input) { deleted(in, time.Second, 200) },
			lost:      []string{"d1"},
			wantEvict: 1,
		},
		"written by a replica that lost the Lease": {
			requests: []Request{lease("a", 0), lease("b", 500*time.Millisecond), del("d1", time.Second, 200)},
			extra:    func(in *input) { deleted(in, time.Second, 200) },
			wantViol: []string{"one writer"},
			// Its deletion still counts as the pod's.
			wantEvict: 1,
		},
		"untimed start counts from first sight": {
			untimed:   true,
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 4200*time.Millisecond, 200)}, // first sight at +10 ms, less 1 s of slack
			extra:     func(in *input) { deleted(in, 4200*time.Millisecond, 200) },
			wantEvict: 1,
		},
		"untimed start more than a second early": {
			untimed:   true,
			tol:       ptrSeconds(5),
			requests:  []Request{del("d1", 3900*time.Millisecond, 200)},
			extra:     func(in *input) { deleted(in, 3900*time.Millisecond, 200) },
			wantViol:  []string{"never early"},
			wantEvict: 1,
		},
		"a longer toleration keeps the deadline": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 5*time.Second, 200)},
			extra: func(in *input) {
				p := in.pods[uid][0].pod.DeepCopy()
				p.Spec.Tolerations[0].TolerationSeconds = ptrSeconds(60)
				in.pods[uid] = append(in.pods[uid], podObs{at: at(2 * time.Second), pod: p})
				deleted(in, 5*time.Second, 200)
			},
			wantEvict: 1,
		},
		"tolerated for ever, deleted 2 s later": {
			tol:      ptrSeconds(5),
			requests: []Request{del("d1", 5*time.Second, 200)},
			extra: func(in *input) {
				p := in.pods[uid][0].pod.DeepCopy()
				p.Spec.Tolerations[0].TolerationSeconds = nil
				in.pods[uid] = append(in.pods[uid], podObs{at: at(3 * time.Second), pod: p})
				deleted(in, 5*time.Second, 200)
			},
			wantViol:  []string{"never early"},
			wantEvict: 1,
		},
		"another's delete just before the pod was recreated under its name": {
			// The test deletes the first pod (no precondition) and creates
			// another under the name half a second later; the controller
			// deletes the new one when it is due.
			tol:      ptrSeconds(5),
			requests: []Request{{AuditID: "t1", Kind: PodDelete, Namespace: "ns", Name: "p", UserAgent: "test", User: "admin", Received: at(time.Second), Completed: at(time.Second + 10*time.Millisecond), Code: 200}},
			extra: func(in *input) {
				first := in.pods[uid][0].pod
				gone := first.DeepCopy()
				in.pods[uid] = append(in.pods[uid], podObs{at: at(time.Second + 20*time.Millisecond), pod: gone, deleted: true})
				second := first.DeepCopy()
				second.UID = "uid-2"
				second.Status.Conditions[0].LastTransitionTime = metav1.Time{Time: at(time.Second)}
				in.pods["uid-2"] = []podObs{{at: at(1500 * time.Millisecond), pod: second}}
				d := del("d2", 6*time.Second, 200)
				d.UID = "uid-2"
				in.requests = append(in.requests, d)
				deleted2 := second.DeepCopy()
				deleted2.DeletionTimestamp = &metav1.Time{Time: at(6 * time.Second)}
				in.pods["uid-2"] = append(in.pods["uid-2"], podObs{at: at(6060 * time.Millisecond), pod: deleted2})
			},
			wantEvict: 1,
		},
		"an unattributed write": {
			requests: []Request{func() Request { r := del("d1", time.Second, 200); r.Identity, r.UserAgent = "", "curl/8"; return r }()},
			extra:    func(in *input) { deleted(in, time.Second, 200) },
			wantViol: []string{"unattributed"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rep := check(s.input())
			assert.Len(t, rep.Violations, len(s.wantViol), "violations: %v", rep.Violations)
			for i, want := range s.wantViol {
				if i < len(rep.Violations) {
					assert.True(t, strings.Contains(rep.Violations[i], want), "violation %q, want %q", rep.Violations[i], want)
				}
			}
			assert.Len(t, rep.Evictions, s.wantEvict, "evictions: %+v", rep.Evictions)
		})
	}
}

func TestPreconditionUID(t *testing.T) {
	assert.Equal(t, types.UID("u1"), preconditionUID(PodDelete, []byte(`{"kind":"DeleteOptions","preconditions":{"uid":"u1"}}`)))
	assert.Equal(t, types.UID(""), preconditionUID(PodDelete, []byte(`{"kind":"DeleteOptions"}`)))
	assert.Equal(t, types.UID("u2"), preconditionUID(PodEvict, []byte(`{"kind":"Eviction","deleteOptions":{"preconditions":{"uid":"u2"}}}`)))
	assert.Equal(t, types.UID("u3"), preconditionUID(PodStatus, []byte(`{"metadata":{"uid":"u3"},"status":{}}`)))
	assert.Equal(t, types.UID(""), preconditionUID(PodStatus, []byte(`{"status":{}}`)))
}

func TestControllerAgent(t *testing.T) {
	m := controllerAgent.FindStringSubmatch("taintkit-noexecute/devel (host_abc12345)")
	assert.Equal(t, []string{"taintkit-noexecute/devel (host_abc12345)", "host_abc12345", ""}, m)
	m = controllerAgent.FindStringSubmatch("taintkit-noexecute/v1.0.0 (host_abc12345) leader-election")
	assert.Equal(t, "host_abc12345", m[1])
	assert.Equal(t, " leader-election", m[2])
	assert.Nil(t, controllerAgent.FindStringSubmatch("kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc"))
}
