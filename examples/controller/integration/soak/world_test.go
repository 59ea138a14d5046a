package soak_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// world is the soak's own view of the cluster (informers of its own): the
// churn picks the objects it changes from it, the disruption stand-in
// counts pods from it, and the report counts the population.
type world struct {
	ns                            string
	podStore, nodeStore, pdbStore cache.Store
	// The DRA objects: every ResourceSlice and DeviceTaintRule.
	sliceStore, ruleStore cache.Store
}

// watchWorld starts informers on the namespace's pods and budgets, on the
// soak's nodes and on the ResourceSlices and DeviceTaintRules, and returns
// once they have listed.
func watchWorld(ctx context.Context, c kubernetes.Interface, ns string) (*world, error) {
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	pods := f.Core().V1().Pods().Informer()
	pdbs := f.Policy().V1().PodDisruptionBudgets().Informer()
	nf := informers.NewSharedInformerFactory(c, 0)
	nodes := nf.Core().V1().Nodes().Informer()
	resourceSlices := nf.Resource().V1().ResourceSlices().Informer()
	rules := nf.Resource().V1().DeviceTaintRules().Informer()
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, pdbs.HasSynced, nodes.HasSynced, resourceSlices.HasSynced, rules.HasSynced) {
		return nil, fmt.Errorf("soak: listing the world: %w", context.Cause(ctx))
	}
	return &world{ns: ns, podStore: pods.GetStore(), nodeStore: nodes.GetStore(), pdbStore: pdbs.GetStore(),
		sliceStore: resourceSlices.GetStore(), ruleStore: rules.GetStore()}, nil
}

// runningPods are the pods not being deleted, by name.
func (w *world) runningPods() []*corev1.Pod {
	var pods []*corev1.Pod
	for _, obj := range w.podStore.List() {
		if p := obj.(*corev1.Pod); p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// livePods counts the pods not being deleted.
func (w *world) livePods() int { return len(w.runningPods()) }

// freePodNames are the names of the population of n that no pod has.
func (w *world) freePodNames(n int) []string {
	var free []string
	for i := range n {
		if _, ok, _ := w.podStore.GetByKey(w.ns + "/" + podName(i)); !ok {
			free = append(free, podName(i))
		}
	}
	return free
}

// nodes are the soak's nodes the server has, by name.
func (w *world) nodes() []*corev1.Node {
	var nodes []*corev1.Node
	for _, obj := range w.nodeStore.List() {
		if n := obj.(*corev1.Node); strings.HasPrefix(n.Name, "soak-node-") {
			nodes = append(nodes, n)
		}
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes
}

// podGone reports whether no pod namespace/name with uid exists, not even
// terminating.
func (w *world) podGone(name string, uid types.UID) bool {
	obj, ok, _ := w.podStore.GetByKey(w.ns + "/" + name)
	return !ok || obj.(*corev1.Pod).UID != uid
}

// slice is the ResourceSlice named name, if the world has it.
func (w *world) slice(name string) (*resourcev1.ResourceSlice, bool) {
	obj, ok, _ := w.sliceStore.GetByKey(name)
	if !ok {
		return nil, false
	}
	return obj.(*resourcev1.ResourceSlice), true
}

// rules are the soak's DeviceTaintRules, by name.
func (w *world) rules() []*resourcev1.DeviceTaintRule {
	var rules []*resourcev1.DeviceTaintRule
	for _, obj := range w.ruleStore.List() {
		if r := obj.(*resourcev1.DeviceTaintRule); strings.HasPrefix(r.Name, rulePrefix) {
			rules = append(rules, r)
		}
	}
	slices.SortFunc(rules, func(a, b *resourcev1.DeviceTaintRule) int { return strings.Compare(a.Name, b.Name) })
	return rules
}

// budgets are the namespace's disruption budgets.
func (w *world) budgets() []*policyv1.PodDisruptionBudget {
	var pdbs []*policyv1.PodDisruptionBudget
	for _, obj := range w.pdbStore.List() {
		pdbs = append(pdbs, obj.(*policyv1.PodDisruptionBudget))
	}
	return pdbs
}
