package cluster

import (
	"context"
	"fmt"
	"net/http"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EvictPod evicts the pod namespace/name as the API server's Eviction API
// (a policy/v1 Eviction with opts as its DeleteOptions) does:
//
//   - A pod that is not running (phase Pending, Succeeded or Failed; no
//     phase counts as Pending) or is terminating is evicted whatever the
//     PodDisruptionBudgets say.
//   - Otherwise the budget that covers the pod, if any, must allow it. A
//     Ready pod needs the budget's DisruptionsAllowed above 0. An unready
//     one takes nothing from the budget: it goes if the budget's
//     UnhealthyPodEvictionPolicy is AlwaysAllow or, by default, if
//     CurrentHealthy ≥ DesiredHealthy > 0, and else needs DisruptionsAllowed
//     above 0 too. A refusal is a TooManyRequests (429) error whose status
//     details carry a cause of type [policyv1.DisruptionBudgetCause]. A pod
//     covered by more than one budget fails with an InternalError (500),
//     which the API server returns because it does not support that.
//   - Then the UID precondition in opts, if any, must hold, or the call fails
//     with a Conflict error. As on the API server, this comes after the
//     budget: a refused pod gets the 429 even if its UID differs.
//   - An eviction let through sets the pod's DisruptionTarget condition
//     (reason EvictionByEvictionAPI), then deletes the pod exactly as
//     [Cluster.DeletePod] does with opts. Handlers see the two writes apart,
//     as informers do: the condition, then the removal or the mark of
//     terminating.
//
// A failed call changes nothing. EvictPod also fails with ctx.Err() if ctx is
// done, with the errors injected by [Cluster.ThrottleDeletes] and
// [Cluster.FailDeletes] while they last (before any other check), and with a
// NotFound error if there is no such pod. opts.DryRun is not modelled.
// Evicting a pod that a budget covers is O(pods).
func (c *Cluster) EvictPod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.deletePod(ctx, namespace, name, opts, true)
}

// markEvicted returns a copy of p with the DisruptionTarget condition the
// Eviction API sets, or nil if p has it already.
func markEvicted(p *v1.Pod, now metav1.Time) *v1.Pod {
	cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}
	p = p.DeepCopy()
	if !setCondition(p, cond, now) {
		return nil
	}
	return p
}

// admit returns the error with which the API server would refuse to evict p
// for its PodDisruptionBudget, or nil, counting refusals. c.mu must be held.
func (c *Cluster) admit(p *v1.Pod) error {
	switch p.Status.Phase {
	case "", v1.PodPending, v1.PodSucceeded, v1.PodFailed:
		// The disruption has happened already, or never will.
		return nil
	}
	if p.DeletionTimestamp != nil {
		return nil
	}
	var b *budget
	for _, x := range c.pdbs {
		if !x.covers(p) {
			continue
		}
		if b != nil {
			return &apierrors.StatusError{ErrStatus: metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    http.StatusInternalServerError,
				Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
			}}
		}
		b = x
	}
	if b == nil {
		return nil
	}
	st := c.status(b)
	if !isReady(p) {
		if pol := b.pdb.Spec.UnhealthyPodEvictionPolicy; pol != nil && *pol == policyv1.AlwaysAllow {
			return nil
		}
		// The application is not disrupted now, and losing a pod that does
		// not count as healthy does not disrupt it.
		if st.DesiredHealthy > 0 && st.CurrentHealthy >= st.DesiredHealthy {
			return nil
		}
	}
	if st.DisruptionsAllowed > 0 {
		return nil
	}
	c.stats.Refused++
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently",
			b.pdb.Name, st.DesiredHealthy, st.CurrentHealthy),
	})
	return err
}
