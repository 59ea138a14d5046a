package soak_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// The churn's vocabulary: taint keys (the last is added without TimeAdded,
// as a tool other than the node lifecycle controller may add it, so its
// countdowns start at first sight), toleration seconds, pod groups (each
// the selector of a disruption budget).
var (
	timedKeys      = []string{"soak.example.com/a", "soak.example.com/b", "soak.example.com/c"}
	untimedKey     = "soak.example.com/untimed"
	taintKeys      = append(slices.Clone(timedKeys), untimedKey)
	tolerationSecs = []int64{5, 10, 20, 40, 90}
	groups         = []string{"g0", "g1", "g2", "g3"}
)

// Operation kinds, as the report counts them.
const (
	opPodCreate     = "pod create"
	opPodDelete     = "pod delete"
	opPodRecreate   = "pod recreate (same name)"
	opTaintAdd      = "taint add"
	opTaintRemove   = "taint remove"
	opTaintFlap     = "taint flap (removed, re-added < 1 s)"
	opTolerationAdd = "toleration add"
	opNodeRecreate  = "node delete + recreate"
	opPDBChange     = "disruption budget change"
)

// weights are the odds of each operation once the population is full.
var weights = []struct {
	op string
	w  int
}{
	{opTaintAdd, 10},
	{opTaintRemove, 12},
	{opTaintFlap, 8},
	{opTolerationAdd, 10},
	{opPodDelete, 5},
	{opPodRecreate, 6},
	{opNodeRecreate, 2},
	{opPDBChange, 4},
	{opDeviceTaintAdd, 6},
	{opDeviceTaintRemove, 6},
	{opPoolGeneration, 2},
	{opRuleCreate, 3},
	{opRuleNarrow, 2},
	{opRuleDelete, 2},
}

// churnConfig sizes the churn.
type churnConfig struct {
	Namespace string
	Nodes     int
	Pods      int           // the steady population
	Interval  time.Duration // the mean time between operations
}

// churn applies random operations, one at a time, driven by one seeded
// source: the sequence of choices is the seed's, whatever the server
// answers (the objects it picks from are what the cluster holds then).
type churn struct {
	cfg   churnConfig
	c     kubernetes.Interface
	rng   *rand.Rand
	world *world

	mu       sync.Mutex
	applied  map[string]int
	raced    map[string]int // found its object gone or replaced meanwhile
	failures []opFailure
	absent   map[string]bool // nodes deleted and not yet created again
	delayed  sync.WaitGroup

	dev deviceState
}

type opFailure struct {
	op  string
	at  time.Time
	err error
}

// errRaced marks an operation that found its object gone, replaced or
// taken meanwhile (by the controller, or by the churn itself): no failure,
// and nothing applied.
var errRaced = errors.New("raced")

func newChurn(cfg churnConfig, c kubernetes.Interface, seed uint64, w *world) *churn {
	return &churn{
		cfg: cfg, c: c, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), world: w,
		applied: map[string]int{}, raced: map[string]int{}, absent: map[string]bool{},
	}
}

func nodeName(i int) string   { return fmt.Sprintf("soak-node-%02d", i) }
func podName(i int) string    { return fmt.Sprintf("pod-%03d", i) }
func pdbName(g string) string { return "budget-" + g }

// setUp creates the nodes, untainted, a budget per group, and the device
// pools.
func (ch *churn) setUp(ctx context.Context) error {
	for i := range ch.cfg.Nodes {
		if _, err := testenv.CreateNode(ctx, ch.c, nodeName(i)); err != nil {
			return err
		}
	}
	for _, g := range groups {
		_, err := ch.c.PolicyV1().PodDisruptionBudgets(ch.cfg.Namespace).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ch.cfg.Namespace, Name: pdbName(g)},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromInt32(int32(ch.cfg.Pods / len(groups) / 2))),
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"group": g}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	}
	return ch.setUpDevices(ctx)
}

// run applies operations until ctx ends, then waits for the delayed halves
// of those that have one (a node created again).
func (ch *churn) run(ctx context.Context) {
	defer ch.delayed.Wait()
	total := 0
	for _, w := range weights {
		total += w.w
	}
	for {
		// Exponential gaps, capped: a Poisson stream of changes.
		gap := time.Duration(ch.rng.ExpFloat64() * float64(ch.cfg.Interval))
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(gap, 5*ch.cfg.Interval)):
		}
		op := ""
		if live := ch.world.livePods(); live < ch.cfg.Pods && ch.rng.IntN(3) > 0 {
			op = opPodCreate
		} else {
			n := ch.rng.IntN(total)
			for _, w := range weights {
				if n -= w.w; n < 0 {
					op = w.op
					break
				}
			}
		}
		applied, err := ch.apply(ctx, op)
		switch {
		case errors.Is(err, errRaced):
			ch.mu.Lock()
			ch.raced[op]++
			ch.mu.Unlock()
		case err != nil && ctx.Err() == nil:
			ch.fail(op, err)
		case err == nil && applied:
			ch.mu.Lock()
			ch.applied[op]++
			ch.mu.Unlock()
		}
	}
}

// apply applies op to objects it picks, and reports whether there was one
// to apply it to.
func (ch *churn) apply(ctx context.Context, op string) (bool, error) {
	ns := ch.cfg.Namespace
	switch op {
	case opPodCreate:
		name, ok := ch.pick(ch.world.freePodNames(ch.cfg.Pods))
		if !ok {
			return false, nil
		}
		return true, ch.createPod(ctx, name)
	case opPodDelete, opPodRecreate:
		pod, ok := pickPod(ch, ch.world.runningPods())
		if !ok {
			return false, nil
		}
		opts := metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
		if op == opPodRecreate {
			// Gone at once (a force delete), so the name is free for its
			// successor.
			opts.GracePeriodSeconds = ptr.To[int64](0)
		}
		if err := ch.c.CoreV1().Pods(ns).Delete(ctx, pod.Name, opts); err != nil {
			return true, ignoreGone(err)
		}
		if op == opPodDelete {
			return true, nil
		}
		return true, ch.createPod(ctx, pod.Name)
	case opTaintAdd:
		node, ok := ch.pick(ch.presentNodes())
		if !ok {
			return false, nil
		}
		key := taintKeys[ch.rng.IntN(len(taintKeys))]
		_, err := testenv.TaintNode(ctx, ch.c, node, newTaint(key))
		return true, ignoreGone(err)
	case opTaintRemove, opTaintFlap:
		node, key, ok := ch.pickTaint()
		if !ok {
			return false, nil
		}
		if _, err := testenv.UntaintNode(ctx, ch.c, node, key, corev1.TaintEffectNoExecute); err != nil {
			return true, ignoreGone(err)
		}
		if op == opTaintRemove {
			return true, nil
		}
		// Seed 003's pattern: back within a second, a new taint (a new
		// TimeAdded) under the same key.
		pause := time.Duration(100+ch.rng.IntN(800)) * time.Millisecond
		select {
		case <-ctx.Done():
			return true, nil
		case <-time.After(pause):
		}
		_, err := testenv.TaintNode(ctx, ch.c, node, newTaint(key))
		return true, ignoreGone(err)
	case opTolerationAdd:
		pod, ok := pickPod(ch, ch.world.runningPods())
		if !ok {
			return false, nil
		}
		tol := ch.toleration(taintKeys[ch.rng.IntN(len(taintKeys))])
		if tol == nil {
			tol = &corev1.Toleration{Key: untimedKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
		}
		return true, ignoreGone(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := ch.c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.UID != pod.UID || cur.DeletionTimestamp != nil {
				return errRaced
			}
			// The API allows only additions to a pod's tolerations.
			cur.Spec.Tolerations = append(cur.Spec.Tolerations, *tol)
			_, err = ch.c.CoreV1().Pods(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}))
	case opNodeRecreate:
		node, ok := ch.pick(ch.presentNodes())
		if !ok {
			return false, nil
		}
		if err := ch.c.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
			return true, ignoreGone(err)
		}
		ch.mu.Lock()
		ch.absent[node] = true
		ch.mu.Unlock()
		// Back after 1–4 s (a node that re-registers), with a taint half
		// the time; its pods stay bound to it meanwhile.
		away := time.Duration(1000+ch.rng.IntN(3000)) * time.Millisecond
		var taints []corev1.Taint
		if ch.rng.IntN(2) == 0 {
			taints = append(taints, newTaint(taintKeys[ch.rng.IntN(len(taintKeys))]))
		}
		ch.delayed.Add(1)
		go func() {
			defer ch.delayed.Done()
			defer func() {
				ch.mu.Lock()
				delete(ch.absent, node)
				ch.mu.Unlock()
			}()
			time.Sleep(away)
			// Until it is back (the server may be away itself), with the
			// churn's own context cancelled or not: a soak that ends leaves
			// every node present.
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			var err error
			for bg.Err() == nil {
				if _, err = testenv.CreateNode(bg, ch.c, node, taints...); err == nil || apierrors.IsAlreadyExists(err) {
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
			ch.fail(opNodeRecreate, fmt.Errorf("node %s not created again within a minute: %w", node, err))
		}()
		return true, nil
	case opPDBChange:
		g := groups[ch.rng.IntN(len(groups))]
		minAvailable := int32(ch.rng.IntN(ch.cfg.Pods/len(groups) + 1))
		return true, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pdb, err := ch.c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdbName(g), metav1.GetOptions{})
			if err != nil {
				return err
			}
			pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(minAvailable))
			_, err = ch.c.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, pdb, metav1.UpdateOptions{})
			return err
		})
	}
	return ch.applyDevice(ctx, op)
}

// createPod creates a pod with random tolerations and group, binds it to a
// present node and reports it Running and Ready, as the scheduler and the
// kubelet would (the Eviction API counts only ready pods as healthy). A
// third of them, while a device is free, get a claim of that device on its
// pool's node (createClaimedPod).
func (ch *churn) createPod(ctx context.Context, name string) error {
	node, ok := ch.pick(ch.presentNodes())
	if !ok {
		return nil
	}
	var tols []corev1.Toleration
	for _, key := range taintKeys {
		if tol := ch.toleration(key); tol != nil {
			tols = append(tols, *tol)
		}
	}
	if p, device, ok := ch.claimDevice(); ok {
		pod := testenv.NewPodWithClaim(ch.cfg.Namespace, name, name+claimSuffix, tols...)
		pod.Labels = map[string]string{"group": groups[ch.rng.IntN(len(groups))]}
		return ch.createClaimedPod(ctx, pod, p, device)
	}
	pod := testenv.NewPod(ch.cfg.Namespace, name, tols...)
	pod.Labels = map[string]string{"group": groups[ch.rng.IntN(len(groups))]}
	if _, err := testenv.CreateBoundPod(ctx, ch.c, pod, node); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return errRaced // the world's view lagged: the name was taken
		}
		return ignoreGone(err)
	}
	_, err := testenv.MarkPodReady(ctx, ch.c, ch.cfg.Namespace, name)
	return ignoreGone(err)
}

// toleration returns a random toleration of key's taint: none (1 in 8),
// for ever (1 in 4), or for some seconds.
func (ch *churn) toleration(key string) *corev1.Toleration {
	tol := &corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	switch n := ch.rng.IntN(8); {
	case n == 0:
		return nil
	case n <= 2:
		return tol
	default:
		tol.TolerationSeconds = ptr.To(tolerationSecs[ch.rng.IntN(len(tolerationSecs))])
		return tol
	}
}

// newTaint is a NoExecute taint of key, stamped now unless key is the
// untimed one.
func newTaint(key string) corev1.Taint {
	if key == untimedKey {
		return corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoExecute}
	}
	return testenv.NoExecuteTaint(key, "true")
}

func (ch *churn) presentNodes() []string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var names []string
	for i := range ch.cfg.Nodes {
		if !ch.absent[nodeName(i)] {
			names = append(names, nodeName(i))
		}
	}
	return names
}

// pickTaint picks a present node's soak taint.
func (ch *churn) pickTaint() (node, key string, ok bool) {
	type nk struct{ node, key string }
	var all []nk
	present := ch.presentNodes()
	for _, n := range ch.world.nodes() {
		if !slices.Contains(present, n.Name) {
			continue
		}
		for _, t := range n.Spec.Taints {
			if strings.HasPrefix(t.Key, "soak.example.com/") {
				all = append(all, nk{n.Name, t.Key})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].node+all[i].key < all[j].node+all[j].key })
	if len(all) == 0 {
		return "", "", false
	}
	p := all[ch.rng.IntN(len(all))]
	return p.node, p.key, true
}

func (ch *churn) pick(names []string) (string, bool) {
	if len(names) == 0 {
		return "", false
	}
	return names[ch.rng.IntN(len(names))], true
}

func pickPod(ch *churn, pods []*corev1.Pod) (*corev1.Pod, bool) {
	if len(pods) == 0 {
		return nil, false
	}
	return pods[ch.rng.IntN(len(pods))], true
}

func (ch *churn) fail(op string, err error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.failures = append(ch.failures, opFailure{op, time.Now(), err})
}

// opCounts are the churn's operations by kind.
type opCounts struct {
	applied, raced   map[string]int
	failed, inFaults map[string]int // failed outside the faults, and while one was active
	lastErr          map[string]string
}

// counts counts the operations; disturbed tells the failures in a fault.
func (ch *churn) counts(disturbed func(time.Time) bool) opCounts {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	c := opCounts{applied: maps.Clone(ch.applied), raced: maps.Clone(ch.raced),
		failed: map[string]int{}, inFaults: map[string]int{}, lastErr: map[string]string{}}
	for _, f := range ch.failures {
		if disturbed(f.at) {
			c.inFaults[f.op]++
			continue
		}
		c.failed[f.op]++
		c.lastErr[f.op] = f.err.Error()
	}
	return c
}

// total is the number of operations tried and of those that failed outside
// the faults.
func (c opCounts) total() (total, failed int) {
	for _, m := range []map[string]int{c.applied, c.raced, c.failed, c.inFaults} {
		for _, n := range m {
			total += n
		}
	}
	for _, n := range c.failed {
		failed += n
	}
	return total, failed
}

// ops are the kinds of operation that occurred, sorted.
func (c opCounts) ops() []string {
	set := map[string]bool{}
	for _, m := range []map[string]int{c.applied, c.raced, c.failed, c.inFaults} {
		for k := range m {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// ignoreGone turns an object gone (or replaced) meanwhile into errRaced:
// the churn raced the controller or itself.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return errRaced
	}
	return err
}
