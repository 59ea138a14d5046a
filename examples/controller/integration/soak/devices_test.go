package soak_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// The device churn's world: a DRA driver with a pool of devices on each of
// the first few nodes (one ResourceSlice per pool and generation), claims
// for a share of the pods, each allocated a device of its own on the pod's
// node and reserved for the pod, and DeviceTaintRules. No driver, scheduler
// or resource claim controller runs: the churn does their part.
const (
	deviceDriver = "gpu.soak.example.com"
	deviceClass  = "soak-gpu"
	// devicePools pools (on soak-node-00…) of poolDevices devices each.
	devicePools, poolDevices = 4, 6
	// ruleMaxPods is the replicas' --device-taint-rule-max-pods: above a
	// pool's devices (a rule of a pool or a device is never held), below
	// what a rule of every device selects once the claims fill the pools.
	ruleMaxPods = 8
	// maxRules is how many of the soak's DeviceTaintRules exist at once.
	maxRules   = 3
	rulePrefix = "soak-rule-"
	// claimSuffix makes a pod's claim's name of the pod's.
	claimSuffix = "-claim"
)

// The device vocabulary: the drivers' taint keys, the rules' key, and the
// seconds of the claims' tolerations.
var (
	deviceTaintKeys = []string{"soak.example.com/gpu-xid", "soak.example.com/gpu-ecc"}
	ruleKey         = "soak.example.com/maintenance"
	deviceTolSecs   = []int64{0, 5, 10, 20, 40}
)

// Device operation kinds, as the report counts them.
const (
	opDeviceTaintAdd    = "device taint add (slice)"
	opDeviceTaintRemove = "device taint remove (slice)"
	opPoolGeneration    = "pool generation published (new slice, old one deleted 0.2–1 s later)"
	opRuleCreate        = "DeviceTaintRule create"
	opRuleNarrow        = "DeviceTaintRule narrow"
	opRuleDelete        = "DeviceTaintRule delete"
)

// pool is a pool's current slice, as the churn (its only writer) made it.
type pool struct {
	name, node, slice string
	generation        int64
}

// holder is the last claim a device was allocated to, and its pod.
type holder struct {
	pod      string
	podUID   types.UID
	claim    string
	claimUID types.UID
}

// deviceState is the churn's own record of the DRA objects it wrote; only
// the churn's loop reads and writes it.
type deviceState struct {
	pools   []*pool
	holders map[string]holder // by pool/device
	rules   int               // the rules created so far
	claimed int               // the pods created with a claim
}

func poolName(i int) string   { return nodeName(i) }
func deviceName(i int) string { return fmt.Sprintf("gpu-%d", i) }
func sliceName(pool string, generation int64) string {
	return fmt.Sprintf("soak-%s-g%d", pool, generation)
}

// setUpDevices creates the device class and each pool's first slice,
// untainted.
func (ch *churn) setUpDevices(ctx context.Context) error {
	ch.dev.holders = map[string]holder{}
	if err := testenv.EnsureDeviceClass(ctx, ch.c, deviceClass); err != nil {
		return err
	}
	for i := range min(devicePools, ch.cfg.Nodes) {
		p := &pool{name: poolName(i), node: nodeName(i), generation: 1}
		p.slice = sliceName(p.name, 1)
		var names []string
		for d := range poolDevices {
			names = append(names, deviceName(d))
		}
		if _, err := testenv.CreateResourceSlice(ctx, ch.c, testenv.NewResourceSlice(p.slice, deviceDriver, p.name, p.node, names...)); err != nil {
			return err
		}
		ch.dev.pools = append(ch.dev.pools, p)
	}
	return nil
}

// applyDevice applies a device operation, as apply does.
func (ch *churn) applyDevice(ctx context.Context, op string) (bool, error) {
	switch op {
	case opDeviceTaintAdd:
		p := ch.dev.pools[ch.rng.IntN(len(ch.dev.pools))]
		device := deviceName(ch.rng.IntN(poolDevices))
		_, err := testenv.TaintDevice(ctx, ch.c, p.slice, device, ch.deviceTaint())
		return true, ignoreGone(err)
	case opDeviceTaintRemove:
		type taintOf struct {
			slice, device, key string
			effect             resourcev1.DeviceTaintEffect
		}
		var all []taintOf
		for _, p := range ch.dev.pools {
			s, ok := ch.world.slice(p.slice)
			if !ok {
				continue
			}
			for _, d := range s.Spec.Devices {
				for _, t := range d.Taints {
					all = append(all, taintOf{p.slice, d.Name, t.Key, t.Effect})
				}
			}
		}
		if len(all) == 0 {
			return false, nil
		}
		t := all[ch.rng.IntN(len(all))]
		_, err := testenv.UntaintDevice(ctx, ch.c, t.slice, t.device, t.key, t.effect)
		return true, ignoreGone(err)
	case opPoolGeneration:
		return true, ch.publishGeneration(ctx, ch.dev.pools[ch.rng.IntN(len(ch.dev.pools))])
	case opRuleCreate:
		if len(ch.world.rules()) >= maxRules {
			return false, nil
		}
		ch.dev.rules++
		name := fmt.Sprintf("%s%03d", rulePrefix, ch.dev.rules)
		var sel *resourcev1.DeviceTaintSelector
		switch ch.rng.IntN(6) {
		case 0: // every device of the cluster: the guard's case
			sel = &resourcev1.DeviceTaintSelector{}
		case 1: // every device of the driver
			sel = &resourcev1.DeviceTaintSelector{Driver: ptr.To(deviceDriver)}
		case 2, 3:
			sel = ch.poolSelector()
		default:
			sel = ch.deviceSelector(ch.poolSelector())
		}
		taint := testenv.NoExecuteDeviceTaint(ruleKey, "true")
		if ch.rng.IntN(6) == 0 {
			taint.Effect = resourcev1.DeviceTaintEffectNone // a preview
		}
		_, err := testenv.CreateDeviceTaintRule(ctx, ch.c, name, sel, taint)
		return true, err
	case opRuleNarrow:
		var wide []*resourcev1.DeviceTaintRule
		for _, r := range ch.world.rules() {
			if sel := r.Spec.DeviceSelector; sel != nil && sel.Device == nil {
				wide = append(wide, r)
			}
		}
		if len(wide) == 0 {
			return false, nil
		}
		r := wide[ch.rng.IntN(len(wide))]
		narrower := ch.poolSelector()
		if r.Spec.DeviceSelector.Pool != nil {
			narrower = ch.deviceSelector(r.Spec.DeviceSelector)
		}
		_, err := testenv.UpdateDeviceTaintRule(ctx, ch.c, r.Name, func(spec *resourcev1.DeviceTaintRuleSpec) {
			spec.DeviceSelector = narrower
		})
		return true, ignoreGone(err)
	case opRuleDelete:
		rules := ch.world.rules()
		if len(rules) == 0 {
			return false, nil
		}
		r := rules[ch.rng.IntN(len(rules))]
		err := ch.c.ResourceV1().DeviceTaintRules().Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(r.UID))})
		return true, ignoreGone(err)
	}
	return false, fmt.Errorf("unknown operation %q", op)
}

// deviceTaint is a random driver's taint: NoExecute, or NoSchedule (1 in
// 8), which evicts no one.
func (ch *churn) deviceTaint() resourcev1.DeviceTaint {
	t := testenv.NoExecuteDeviceTaint(deviceTaintKeys[ch.rng.IntN(len(deviceTaintKeys))], "true")
	if ch.rng.IntN(8) == 0 {
		t.Effect = resourcev1.DeviceTaintEffectNoSchedule
	}
	return t
}

func (ch *churn) poolSelector() *resourcev1.DeviceTaintSelector {
	p := ch.dev.pools[ch.rng.IntN(len(ch.dev.pools))]
	return &resourcev1.DeviceTaintSelector{Driver: ptr.To(deviceDriver), Pool: ptr.To(p.name)}
}

func (ch *churn) deviceSelector(pool *resourcev1.DeviceTaintSelector) *resourcev1.DeviceTaintSelector {
	sel := *pool
	sel.Device = ptr.To(deviceName(ch.rng.IntN(poolDevices)))
	return &sel
}

// publishGeneration publishes the pool's next generation, as a driver does
// when its devices change: a new slice with the devices' taints, one taint
// dropped or one added, and the old slice deleted 0.2–1 s later (the
// generations overlap meanwhile: only the newest counts).
func (ch *churn) publishGeneration(ctx context.Context, p *pool) error {
	cur, err := ch.c.ResourceV1().ResourceSlices().Get(ctx, p.slice, metav1.GetOptions{})
	if err != nil {
		return err
	}
	next := testenv.NewResourceSlice(sliceName(p.name, p.generation+1), deviceDriver, p.name, p.node)
	next.Spec.Pool.Generation = p.generation + 1
	next.Spec.Devices = cur.Spec.Devices
	var tainted []int
	for i, d := range next.Spec.Devices {
		if len(d.Taints) > 0 {
			tainted = append(tainted, i)
		}
	}
	if len(tainted) > 0 && ch.rng.IntN(2) == 0 {
		d := &next.Spec.Devices[tainted[ch.rng.IntN(len(tainted))]]
		d.Taints = slices.Delete(d.Taints, 0, 1)
	} else {
		d := &next.Spec.Devices[ch.rng.IntN(len(next.Spec.Devices))]
		t := ch.deviceTaint()
		d.Taints = append(slices.DeleteFunc(d.Taints, func(x resourcev1.DeviceTaint) bool {
			return x.Key == t.Key && x.Effect == t.Effect
		}), t)
	}
	pause := time.Duration(200+ch.rng.IntN(800)) * time.Millisecond
	// A create whose answer a fault lost is found on the next try.
	if _, err := testenv.CreateResourceSlice(ctx, ch.c, next); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	old := p.slice
	p.slice, p.generation = next.Name, next.Spec.Pool.Generation
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(pause):
	}
	if err := ch.c.ResourceV1().ResourceSlices().Delete(ctx, old, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// claimDevice picks, for a third of the pods created, a device whose last
// pod is gone, on a node that is present.
func (ch *churn) claimDevice() (*pool, string, bool) {
	if ch.rng.IntN(3) != 0 {
		return nil, "", false
	}
	present := ch.presentNodes()
	type free struct {
		p      *pool
		device string
	}
	var all []free
	for _, p := range ch.dev.pools {
		if !slices.Contains(present, p.node) {
			continue
		}
		for d := range poolDevices {
			h, ok := ch.dev.holders[p.name+"/"+deviceName(d)]
			if !ok || ch.world.podGone(h.pod, h.podUID) {
				all = append(all, free{p, deviceName(d)})
			}
		}
	}
	if len(all) == 0 {
		return nil, "", false
	}
	f := all[ch.rng.IntN(len(all))]
	return f.p, f.device, true
}

// createClaimedPod creates pod with a claim of its own for the device of
// p, as a user, the scheduler and a driver do: the device's last claim (its
// pod gone) and an earlier pod's claim of the same name are deleted, as the
// resource claim controller does; then the claim, the pod bound to the
// pool's node, and the claim's allocation of the device, with random
// tolerations, reserved for the pod.
func (ch *churn) createClaimedPod(ctx context.Context, pod *corev1.Pod, p *pool, device string) error {
	ns := ch.cfg.Namespace
	claims := ch.c.ResourceV1().ResourceClaims(ns)
	key := p.name + "/" + device
	if h, ok := ch.dev.holders[key]; ok {
		opts := metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(h.claimUID))}
		if err := claims.Delete(ctx, h.claim, opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	claimName := pod.Name + claimSuffix
	if err := claims.Delete(ctx, claimName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	tols := ch.deviceTolerations()
	claim, err := testenv.CreateClaim(ctx, ch.c, ns, claimName, deviceClass)
	if err != nil {
		return err
	}
	created, err := testenv.CreateBoundPod(ctx, ch.c, pod, p.node)
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return errRaced
		}
		return ignoreGone(err)
	}
	ch.dev.holders[key] = holder{pod: pod.Name, podUID: created.UID, claim: claimName, claimUID: claim.UID}
	id := testenv.DeviceID{Driver: deviceDriver, Pool: p.name, Device: device}
	if _, err := testenv.AllocateClaim(ctx, ch.c, ns, claimName, created, id, tols...); err != nil {
		return ignoreGone(err)
	}
	ch.dev.claimed++
	_, err = testenv.MarkPodReady(ctx, ch.c, ns, pod.Name)
	return ignoreGone(err)
}

// deviceTolerations are a claim's request's tolerations: for each device
// key and the rules' key, none (1 in 4), for ever (NoExecute, or any
// effect: an empty effect), or for some seconds (NoExecute, Equal or
// Exists, or an empty effect).
func (ch *churn) deviceTolerations() []resourcev1.DeviceToleration {
	var tols []resourcev1.DeviceToleration
	for _, key := range append(slices.Clone(deviceTaintKeys), ruleKey) {
		tol := resourcev1.DeviceToleration{Key: key, Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute}
		seconds := ptr.To(deviceTolSecs[ch.rng.IntN(len(deviceTolSecs))])
		switch ch.rng.IntN(8) {
		case 0, 1:
			continue
		case 2:
		case 3:
			tol.Effect = ""
		case 4, 5:
			tol.TolerationSeconds = seconds
		case 6:
			tol.Effect, tol.TolerationSeconds = "", seconds
		case 7:
			tol.Operator, tol.Value, tol.TolerationSeconds = resourcev1.DeviceTolerationOpEqual, "true", seconds
		}
		tols = append(tols, tol)
	}
	return tols
}

// claimedPods is how many pods the churn created with a claim.
func (ch *churn) claimedPods() int { return ch.dev.claimed }

// isDeviceTaint reports whether an eviction's taint, as the oracle names
// it, is a device's, and whether it is a DeviceTaintRule's.
func isDeviceTaint(taint string) (device, rule bool) {
	return strings.HasPrefix(taint, "device "), strings.HasSuffix(taint, ")") && strings.Contains(taint, "(rule ")
}
