package tolerations_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/tolerations"
)

// A standby fed only by the informers' events (ObserveNode, ObservePod,
// ObservePodDeleted, ForgetNode) decides, when it takes over, what the
// leader that decided on every update would have: random histories of
// taints added, refreshed in place, changed and removed, pods created,
// recreated, scheduled, given longer or shorter tolerations and deleted,
// with the clock moving between them.
func TestStandbyDecidesAsTheLeader(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newWorld(seed)
			for step := range 60 {
				op := w.step()
				for _, p := range w.pods {
					node := w.nodes[p.Spec.NodeName]
					lead, stand := w.leader.Recheck(node, p), w.standby.Recheck(node, p)
					if !assert.Equal(t, lead, stand, "step %d after %s: pod %s on %s", step, op, p.Name, p.Spec.NodeName) {
						return
					}
				}
			}
		})
	}
}

// world is a small cluster whose every change a leader decides on, as the
// manager does, and a standby observes, as informer handlers do.
type world struct {
	rng             *rand.Rand
	clk             *testingclock.FakeClock
	leader, standby *tolerations.Countdowns
	nodes           map[string]*v1.Node
	pods            map[string]*v1.Pod
	uids            int
}

func newWorld(seed uint64) *world {
	clk := testingclock.NewFakeClock(t0)
	return &world{
		rng:     rand.New(rand.NewPCG(seed, 1)),
		clk:     clk,
		leader:  tolerations.NewCountdowns(clk, tolerations.Matcher{}),
		standby: tolerations.NewCountdowns(clk, tolerations.Matcher{}),
		nodes:   map[string]*v1.Node{"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, "n2": {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}},
		pods:    map[string]*v1.Pod{},
	}
}

func (w *world) pick(options ...string) string { return options[w.rng.IntN(len(options))] }

// step makes one random change, tells both replicas of it, and names it.
func (w *world) step() string {
	w.clk.Step(time.Duration(w.rng.IntN(20)) * time.Second)
	switch w.rng.IntN(6) {
	case 0, 1:
		return w.changeNode(w.pick("n1", "n2"))
	case 2:
		return w.createPod(w.pick("p1", "p2", "p3"))
	case 3:
		return w.changeTolerations(w.pick("p1", "p2", "p3"))
	case 4:
		return w.schedule(w.pick("p1", "p2", "p3"))
	default:
		return w.deletePod(w.pick("p1", "p2", "p3"))
	}
}

func (w *world) changeNode(name string) string {
	node := w.nodes[name].DeepCopy()
	key := w.pick("a", "b")
	i := slicesIndex(node.Spec.Taints, key)
	var what string
	switch {
	case i < 0:
		taint := v1.Taint{Key: key, Value: w.pick("", "x"), Effect: v1.TaintEffectNoExecute}
		if w.rng.IntN(2) == 0 {
			taint.TimeAdded = &metav1.Time{Time: w.clk.Now().Add(-time.Duration(w.rng.IntN(30)) * time.Second)}
		}
		node.Spec.Taints = append(node.Spec.Taints, taint)
		what = "taint added"
	case w.rng.IntN(3) == 0:
		node.Spec.Taints = append(node.Spec.Taints[:i:i], node.Spec.Taints[i+1:]...)
		what = "taint removed"
	case w.rng.IntN(2) == 0:
		node.Spec.Taints[i].TimeAdded = &metav1.Time{Time: w.clk.Now()}
		what = "taint refreshed in place"
	default:
		node.Spec.Taints[i].Value = w.pick("", "x")
		what = "taint value changed"
	}
	w.nodes[name] = node
	// The leader observes the node and decides every pod on it, as the
	// manager's node handler does.
	w.leader.ObserveNode(node)
	for _, p := range w.pods {
		if p.Spec.NodeName == name {
			w.leader.Decide(node, p)
		}
	}
	if w.standby.ObserveNode(node) {
		for _, p := range w.pods {
			if p.Spec.NodeName == name {
				w.standby.ObservePod(p)
			}
		}
	}
	return fmt.Sprintf("%s %s on %s", what, key, name)
}

func (w *world) podUpdated(p *v1.Pod) {
	w.pods[p.Name] = p
	w.leader.Decide(w.nodes[p.Spec.NodeName], p)
	w.standby.ObservePod(p)
}

func (w *world) createPod(name string) string {
	if old, ok := w.pods[name]; ok {
		w.deletePod(old.Name)
	}
	w.uids++
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(fmt.Sprint("uid-", w.uids))},
		Spec:       v1.PodSpec{NodeName: w.pick("n1", "n2"), Tolerations: w.tolerations()},
	}
	if w.rng.IntN(2) == 0 {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.Time{Time: w.clk.Now().Add(-time.Duration(w.rng.IntN(30)) * time.Second)}}}
	}
	w.podUpdated(p)
	return fmt.Sprintf("pod %s created on %s", name, p.Spec.NodeName)
}

func (w *world) tolerations() []v1.Toleration {
	var tols []v1.Toleration
	for range w.rng.IntN(3) {
		tol := v1.Toleration{Key: w.pick("a", "b", ""), Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
		if s := w.pick("nil", "0", "10", "60"); s != "nil" {
			var secs int64
			fmt.Sscan(s, &secs)
			tol.TolerationSeconds = &secs
		}
		tols = append(tols, tol)
	}
	return tols
}

func (w *world) changeTolerations(name string) string {
	p, ok := w.pods[name]
	if !ok {
		return "nothing"
	}
	p = p.DeepCopy()
	p.Spec.Tolerations = w.tolerations()
	w.podUpdated(p)
	return "tolerations of " + name + " changed"
}

func (w *world) schedule(name string) string {
	p, ok := w.pods[name]
	if !ok {
		return "nothing"
	}
	p = p.DeepCopy()
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue,
		LastTransitionTime: metav1.Time{Time: w.clk.Now().Add(-time.Duration(w.rng.IntN(60)) * time.Second)}}}
	w.podUpdated(p)
	return "PodScheduled set on " + name
}

func (w *world) deletePod(name string) string {
	p, ok := w.pods[name]
	if !ok {
		return "nothing"
	}
	delete(w.pods, name)
	w.leader.ObservePodDeleted(p)
	w.standby.ObservePodDeleted(p)
	return "pod " + name + " deleted"
}

func slicesIndex(taints []v1.Taint, key string) int {
	for i := range taints {
		if taints[i].Key == key {
			return i
		}
	}
	return -1
}
