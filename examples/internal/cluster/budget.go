package cluster

import (
	"cmp"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// budget is a stored PodDisruptionBudget with its selector parsed once.
type budget struct {
	pdb *policyv1.PodDisruptionBudget // Status left empty: it is computed when read
	sel labels.Selector
}

// covers reports whether b guards p: same namespace, labels matched.
func (b *budget) covers(p *v1.Pod) bool {
	return b.pdb.Namespace == p.Namespace && b.sel.Matches(labels.Set(p.Labels))
}

// AddPDB stores a copy of pdb and returns it with its status. An empty
// namespace becomes "default"; a zero Generation becomes 1. The model's
// disruption controller is instant, so the status is never stale: see
// [Cluster.GetPDB].
//
// Only an integer Spec.MinAvailable is modelled: MaxUnavailable and
// percentages need the scale of the pods' controllers, which the cluster does
// not have, and fail with an error. Spec.UnhealthyPodEvictionPolicy is
// honoured. A negative MinAvailable or an invalid selector fails with an
// Invalid error, as the API server's validation does; an existing budget of
// that namespace and name with an AlreadyExists error.
func (c *Cluster) AddPDB(pdb *policyv1.PodDisruptionBudget) (*policyv1.PodDisruptionBudget, error) {
	b := &budget{pdb: pdb.DeepCopy()}
	p := b.pdb
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	if p.Generation == 0 {
		p.Generation = 1
	}
	p.Status = policyv1.PodDisruptionBudgetStatus{}
	minAvail := p.Spec.MinAvailable
	if minAvail == nil || minAvail.Type != intstr.Int || p.Spec.MaxUnavailable != nil {
		return nil, fmt.Errorf("cluster: PodDisruptionBudget %s/%s: only an integer spec.minAvailable is modelled", p.Namespace, p.Name)
	}
	var errs field.ErrorList
	if minAvail.IntVal < 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "minAvailable"), minAvail.IntVal, "must be greater than or equal to 0"))
	}
	var err error
	if b.sel, err = metav1.LabelSelectorAsSelector(p.Spec.Selector); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), p.Spec.Selector, err.Error()))
	}
	if pol := p.Spec.UnhealthyPodEvictionPolicy; pol != nil && *pol != policyv1.IfHealthyBudget && *pol != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "unhealthyPodEvictionPolicy"), *pol,
			[]policyv1.UnhealthyPodEvictionPolicyType{policyv1.IfHealthyBudget, policyv1.AlwaysAllow}))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget").GroupKind(), p.Name, errs)
	}

	// writeMu too, so that no budget comes or goes in the middle of an
	// eviction.
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if _, ok := c.pdbs[k]; ok {
		return nil, apierrors.NewAlreadyExists(policyv1.Resource("poddisruptionbudgets"), p.Name)
	}
	p.CreationTimestamp = c.now()
	c.pdbs[k] = b
	return c.withStatus(b), nil
}

// DeletePDB removes the PodDisruptionBudget namespace/name. It fails with a
// NotFound error if there is none.
func (c *Cluster) DeletePDB(namespace, name string) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	k := types.NamespacedName{Namespace: namespace, Name: name}
	if _, ok := c.pdbs[k]; !ok {
		return apierrors.NewNotFound(policyv1.Resource("poddisruptionbudgets"), name)
	}
	delete(c.pdbs, k)
	return nil
}

// GetPDB returns a copy of the PodDisruptionBudget namespace/name with its
// status as the disruption controller would write it now, or a NotFound
// error. A budget covers the pods of its namespace its selector matches (an
// empty selector matches them all, a nil one none); of those, the healthy
// ones are Ready (see [Cluster.SetPodReady]) and not terminating. The status
// has ExpectedPods (pods covered), CurrentHealthy, DesiredHealthy
// (MinAvailable), DisruptionsAllowed (CurrentHealthy − DesiredHealthy, at
// least 0) and ObservedGeneration; no conditions. Reading it is O(pods).
func (c *Cluster) GetPDB(namespace, name string) (*policyv1.PodDisruptionBudget, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.pdbs[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(policyv1.Resource("poddisruptionbudgets"), name)
	}
	return c.withStatus(b), nil
}

// ListPDBs returns a copy of every PodDisruptionBudget with its status, as
// [Cluster.GetPDB] does, sorted by namespace and name.
func (c *Cluster) ListPDBs() []*policyv1.PodDisruptionBudget {
	c.mu.RLock()
	out := make([]*policyv1.PodDisruptionBudget, 0, len(c.pdbs))
	for _, b := range c.pdbs {
		out = append(out, c.withStatus(b))
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b *policyv1.PodDisruptionBudget) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// withStatus returns a copy of b's budget with its status. c.mu must be held.
func (c *Cluster) withStatus(b *budget) *policyv1.PodDisruptionBudget {
	out := b.pdb.DeepCopy()
	out.Status = c.status(b)
	return out
}

// status computes b's status as the disruption controller does, at once.
// Evicted pods need no DisruptedPods entry: they are gone or terminating by
// the time anyone reads the status. c.mu must be held.
func (c *Cluster) status(b *budget) policyv1.PodDisruptionBudgetStatus {
	var expected, healthy int32
	for _, p := range c.pods {
		if !b.covers(p) {
			continue
		}
		expected++
		if p.DeletionTimestamp == nil && isReady(p) {
			healthy++
		}
	}
	desired := b.pdb.Spec.MinAvailable.IntVal
	return policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: b.pdb.Generation,
		DisruptionsAllowed: max(0, healthy-desired),
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
	}
}
