package soak_test

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// disruptedPodTimeout is how long a pod the Eviction API marked disrupted
// stays out of the healthy count if it is not deleted (the disruption
// controller's own timeout is two minutes).
const disruptedPodTimeout = 2 * time.Minute

// disruptionStandIn writes the status of the namespace's disruption
// budgets as kube-controller-manager's disruption controller would (there
// is none here), every interval: expected pods are those the selector
// matches, healthy those of them Running and Ready, not being deleted and
// not just disrupted; desired is minAvailable; allowed what healthy has
// beyond it. The Eviction API reads it, takes one allowed disruption per
// eviction and records the pod in disruptedPods, which the stand-in keeps
// for pods still running, for two minutes at most.
type disruptionStandIn struct {
	c     kubernetes.Interface
	world *world

	mu      sync.Mutex
	writes  int
	lastErr error
}

func (d *disruptionStandIn) run(ctx context.Context, interval time.Duration) {
	for {
		for _, pdb := range d.world.budgets() {
			d.sync(ctx, pdb)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (d *disruptionStandIn) sync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) {
	now := time.Now()
	st := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      map[string]metav1.Time{},
	}
	for _, p := range d.world.runningPods() {
		if p.Labels["group"] != pdb.Spec.Selector.MatchLabels["group"] {
			continue
		}
		st.ExpectedPods++
		if at, ok := pdb.Status.DisruptedPods[p.Name]; ok && now.Sub(at.Time) < disruptedPodTimeout {
			st.DisruptedPods[p.Name] = at
			continue
		}
		if ready(p) {
			st.CurrentHealthy++
		}
	}
	if pdb.Spec.MinAvailable != nil {
		st.DesiredHealthy = pdb.Spec.MinAvailable.IntVal
	}
	st.DisruptionsAllowed = max(0, st.CurrentHealthy-st.DesiredHealthy)
	status, reason := metav1.ConditionFalse, policyv1.InsufficientPodsReason
	if st.DisruptionsAllowed > 0 {
		status, reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: status, Reason: reason,
		ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	if len(pdb.Status.Conditions) == 1 && pdb.Status.Conditions[0].Status == status {
		cond.LastTransitionTime = pdb.Status.Conditions[0].LastTransitionTime
	}
	st.Conditions = []metav1.Condition{cond}
	if len(st.DisruptedPods) == 0 {
		st.DisruptedPods = nil
	}
	old := pdb.Status
	if len(old.DisruptedPods) == 0 {
		old.DisruptedPods = nil
	}
	if equality.Semantic.DeepEqual(old, st) {
		return
	}
	up := pdb.DeepCopy()
	up.Status = st
	// A conflict (the Eviction API took a disruption meanwhile) is settled
	// by the next round, from the informer's newer copy.
	_, err := d.c.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.writes++
	} else {
		d.lastErr = err
	}
}

func ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// result is how many status writes the stand-in made, and its last failed
// one's error (a conflict with the Eviction API's own write, most often).
func (d *disruptionStandIn) result() (writes int, lastErr error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes, d.lastErr
}
