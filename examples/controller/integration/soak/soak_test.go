// Package soak_test runs the controller's binary for as long as asked
// against a real kube-apiserver and etcd (testenv.ForTest) under a seeded
// stream of the changes a large cluster makes — taints added, removed and
// flapped, tolerations added, pods created, deleted and recreated under the
// same names around a steady population, nodes deleted and recreated,
// disruption budgets changed; and, with --device-taints, pods whose claims
// hold DRA devices, the devices' taints added and removed in their
// ResourceSlices, pools' new generations published, DeviceTaintRules
// created, narrowed and deleted (one of every device held by the guard) —
// with faults mixed in: the leader SIGKILLed
// every few minutes (a supervisor starts it again) and the API server
// restarted every ten. The oracle (internal/oracle) checks the whole run
// from the server's audit log and its own watch: never early, never lost,
// never twice, one writer. A replica that is never killed is sampled every
// 10 s for leaks.
//
// TestSoak runs only when TAINTKIT_SOAK is set to a duration; see
// hack/soak.sh. It runs on the real clock.
package soak_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// soakConfig is what the environment asks for.
type soakConfig struct {
	duration    time.Duration
	asked       string // the duration as TAINTKIT_SOAK gave it
	seed        uint64
	pods, nodes int
	replicas    int // 3, or 1: the survivor alone, leading
	evictionAPI bool
	killEvery   time.Duration // the leader kills' spacing
	report      string        // a file for the report, if not empty
}

func configFromEnv(t *testing.T) soakConfig {
	d := os.Getenv("TAINTKIT_SOAK")
	if d == "" {
		t.Skip("TAINTKIT_SOAK is not set: run examples/controller/hack/soak.sh DURATION SEED")
	}
	cfg := soakConfig{asked: d, seed: 1, pods: 200, nodes: 10, replicas: 3, evictionAPI: true, killEvery: defaultKillEvery, report: os.Getenv("TAINTKIT_SOAK_REPORT")}
	var err error
	if cfg.duration, err = time.ParseDuration(d); err != nil || cfg.duration < 5*time.Minute {
		t.Fatalf("TAINTKIT_SOAK=%q: want a duration of 5m or more: time for a leader kill, 2 minutes for the new standby to warm up, and an API server restart (%v)", d, err)
	}
	if s := os.Getenv("TAINTKIT_SOAK_SEED"); s != "" {
		if cfg.seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TAINTKIT_SOAK_SEED=%q: %v", s, err)
		}
	}
	for env, p := range map[string]*int{"TAINTKIT_SOAK_PODS": &cfg.pods, "TAINTKIT_SOAK_NODES": &cfg.nodes} {
		if s := os.Getenv(env); s != "" {
			if *p, err = strconv.Atoi(s); err != nil || *p < 1 {
				t.Fatalf("%s=%q: want a positive number", env, s)
			}
		}
	}
	if s := os.Getenv("TAINTKIT_SOAK_REPLICAS"); s != "" {
		if cfg.replicas, err = strconv.Atoi(s); err != nil || cfg.replicas != 1 && cfg.replicas != 3 {
			t.Fatalf("TAINTKIT_SOAK_REPLICAS=%q: want 3 (the default) or 1", s)
		}
	}
	if s := os.Getenv("TAINTKIT_SOAK_EVICTION_API"); s != "" {
		if cfg.evictionAPI, err = strconv.ParseBool(s); err != nil {
			t.Fatalf("TAINTKIT_SOAK_EVICTION_API=%q: %v", s, err)
		}
	}
	if s := os.Getenv("TAINTKIT_SOAK_KILL_EVERY"); s != "" {
		if cfg.killEvery, err = time.ParseDuration(s); err != nil || cfg.killEvery < 45*time.Second {
			t.Fatalf("TAINTKIT_SOAK_KILL_EVERY=%q: want a duration of 45s or more (%v)", s, err)
		}
	}
	return cfg
}

// defaultKillEvery is the leader kills' spacing unless
// TAINTKIT_SOAK_KILL_EVERY says otherwise.
const defaultKillEvery = 3 * time.Minute

// replay is the command that runs the soak again as configured.
func (cfg soakConfig) replay() string {
	var env []string
	for _, kv := range []struct {
		name      string
		val, dflt any
	}{
		{"TAINTKIT_SOAK_PODS", cfg.pods, 200}, {"TAINTKIT_SOAK_NODES", cfg.nodes, 10},
		{"TAINTKIT_SOAK_REPLICAS", cfg.replicas, 3}, {"TAINTKIT_SOAK_EVICTION_API", cfg.evictionAPI, true},
		{"TAINTKIT_SOAK_KILL_EVERY", cfg.killEvery, defaultKillEvery},
	} {
		if kv.val != kv.dflt {
			env = append(env, fmt.Sprintf("%s=%v ", kv.name, kv.val))
		}
	}
	return fmt.Sprintf("%sexamples/controller/hack/soak.sh %s %d", strings.Join(env, ""), cfg.asked, cfg.seed)
}

// Leader election: the killable replicas take over within seconds; the
// survivor asks for the Lease only every 7 minutes (and would hold it for
// 10), so it stays a standby — it becomes the leader only if one of its rare
// attempts falls in the second between a kill's lease expiry and the other
// replica's next attempt, and then it leads to the end (and the kills after
// it are skipped).
var (
	killableFlags = []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	survivorFlags = []string{"--leader-elect-lease-duration=10m", "--leader-elect-renew-deadline=9m", "--leader-elect-retry-period=7m"}
	// soloFlags are the survivor's when it runs alone (TAINTKIT_SOAK_REPLICAS=1)
	// and leads: a renew deadline longer than an API server restart, so the
	// restarts do not end its run.
	soloFlags = []string{"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=2s"}
)

const (
	ns = "soak"
	// drain is how long the soak goes on after the churn and the faults
	// stop, so that what became due at the end is evicted before the check.
	drain = 30 * time.Second
	// sampleEvery is the leak sampler's period.
	sampleEvery = 10 * time.Second
	// leakFrom is when the leak baseline is taken, and leakWindow how many
	// samples' mean each end of the comparison is.
	leakFrom, leakWindow = 5 * time.Minute, 30 * time.Second
	// leakBound is the growth allowed from leakFrom to the end.
	leakBound = 1.20
)

func TestSoak(t *testing.T) {
	cfg := configFromEnv(t)
	replay := cfg.replay()
	t.Logf("soak: %v, seed %d, %d pods on %d nodes, %d replicas, eviction API %v; replay: %s",
		cfg.duration, cfg.seed, cfg.pods, cfg.nodes, cfg.replicas, cfg.evictionAPI, replay)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("soak FAILED with seed %d; replay: %s", cfg.seed, replay)
		}
	})
	// Without -race: the soak measures the binary's memory, which the race
	// detector's would swamp.
	buildStart := time.Now()
	bin, err := testenv.BuildController(false)
	require.NoError(t, err)
	t.Logf("built the controller in %v", time.Since(buildStart).Round(time.Millisecond))

	env := testenv.ForTest(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), cfg.duration+15*time.Minute)
	defer cancel()
	c := env.Client()
	_, err = env.ApplyManifests(ctx, "../../deploy/serviceaccount.yaml", "../../deploy/rbac.yaml",
		"../../deploy/readers.yaml", "../../deploy/components/eviction-api-permission/rbac.yaml",
		"../../deploy/components/device-taints/rbac.yaml")
	require.NoError(t, err)
	sa := env.ImpersonatedConfig("kube-system", "taintkit-noexecute")
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "watch", Resource: "pods"},
		{Verb: "delete", Resource: "pods"},
		{Verb: "create", Resource: "pods", Subresource: "eviction"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "taintkit-noexecute"},
		{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
		{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
		{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceslices"},
		{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceclaims"},
		{Verb: "watch", Group: "resource.k8s.io", Resource: "devicetaintrules"},
		{Verb: "patch", Group: "resource.k8s.io", Resource: "devicetaintrules", Subresource: "status"},
	} {
		require.NoError(t, testenv.WaitForAccess(ctx, sa, attrs))
	}
	dir := t.TempDir()
	if keep := os.Getenv("TAINTKIT_SOAK_LOGS"); keep != "" {
		dir = keep
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	// A failed soak keeps the API server's audit log with the replicas' logs
	// (when they are kept): the oracle's violations name audit IDs.
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("TAINTKIT_SOAK_LOGS") != "" {
			if data, err := os.ReadFile(env.AuditLogPath()); err == nil {
				_ = os.WriteFile(filepath.Join(dir, "audit.log"), data, 0o644)
			}
		}
	})
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, testenv.WriteKubeconfig(kubeconfig, sa))
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A ServiceAccount allowed /metrics, and tokens for it that outlive the
	// soak (a TokenRequest's default is an hour).
	_, err = env.ServiceAccountToken(ctx, ns, "scraper", "taintkit-noexecute-metrics-reader")
	require.NoError(t, err)
	token := func() (string, error) {
		tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scraper", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64((cfg.duration + time.Hour) / time.Second))},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return tr.Status.Token, nil
	}
	scrapeToken, err := token()
	require.NoError(t, err)

	finaliser, err := testenv.StartPodFinaliser(ctx, c, ns)
	require.NoError(t, err)
	t.Cleanup(func() { _ = finaliser.Stop() }) // on a failure before the end
	// The oracle watches through a second API server on the same etcd,
	// which the restarts leave alone: a pod created and evicted while the
	// first one was coming back is seen all the same.
	witnessCfg, err := env.StartWitness(ctx)
	require.NoError(t, err)
	witness, err := kubernetes.NewForConfig(witnessCfg)
	require.NoError(t, err)
	o, err := oracle.Start(ctx, oracle.Options{Client: witness, AuditLog: env.AuditLogPath(), Namespace: ns})
	require.NoError(t, err)
	t.Cleanup(o.EndWatch)
	w, err := watchWorld(ctx, witness, ns)
	require.NoError(t, err)
	ch := newChurn(churnConfig{Namespace: ns, Nodes: cfg.nodes, Pods: cfg.pods, Interval: 150 * time.Millisecond}, c, cfg.seed, w)
	require.NoError(t, ch.setUp(ctx))

	// The replicas: two killable, then the survivor once one of them leads;
	// or the survivor alone, leading.
	// -v=2 logs each eviction and cancellation: what a failed soak is
	// diagnosed from (TAINTKIT_SOAK_VERBOSITY overrides it).
	verbosity := cmp.Or(os.Getenv("TAINTKIT_SOAK_VERBOSITY"), "2")
	args := []string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0", "--shutdown-grace-period=5s", "--leader-elect=true", "-v=" + verbosity,
		"--device-taints", fmt.Sprintf("--device-taint-rule-max-pods=%d", ruleMaxPods)}
	o.RuleMaxPods(time.Now(), ruleMaxPods)
	if cfg.evictionAPI {
		args = append(args, "--use-eviction-api", "--eviction-fallback-after=30s")
	}
	var killable []*replica
	names, sFlags := []string{"a", "b"}, survivorFlags
	if cfg.replicas == 1 {
		names, sFlags = nil, soloFlags
	}
	for i, name := range names {
		r, err := startReplica(ctx, name, bin, dir, append(slices.Clone(args), killableFlags...)...)
		require.NoError(t, err)
		t.Cleanup(func() { r.stop(20 * time.Second) }) // on a failure before the end
		killable = append(killable, r)
		if i == 0 {
			_, err = (&injector{c: c}).waitLease(ctx, func(l *coordinationv1.Lease) bool {
				return ptr.Deref(l.Spec.HolderIdentity, "") == r.Identity()
			})
			require.NoError(t, err)
		}
	}
	survivor, err := startReplica(ctx, "survivor", bin, dir, append(slices.Clone(args), sFlags...)...)
	require.NoError(t, err)
	t.Cleanup(func() { survivor.stop(20 * time.Second) })
	survivorPid := survivor.Pid()
	if cfg.replicas == 1 {
		_, err = (&injector{c: c}).waitLease(ctx, func(l *coordinationv1.Lease) bool {
			return ptr.Deref(l.Spec.HolderIdentity, "") == survivor.Identity()
		})
		require.NoError(t, err)
	}

	begin := time.Now()
	runCtx, stopRun := context.WithDeadline(ctx, begin.Add(cfg.duration))
	defer stopRun()
	// The budgets' stand-in goes on through the drain: the Eviction API
	// needs it to allow disruptions again.
	standCtx, stopStand := context.WithCancel(ctx)
	defer stopStand()
	stand := &disruptionStandIn{c: c, world: w}
	standDone := make(chan struct{})
	go func() {
		defer close(standDone)
		stand.run(standCtx, 500*time.Millisecond)
	}()
	var wg sync.WaitGroup
	wg.Go(func() { ch.run(runCtx) })
	frng := rand.New(rand.NewPCG(cfg.seed+1, cfg.seed^0x5bd1e995))
	plan := schedule(cfg.duration, cfg.killEvery, frng)
	if cfg.replicas == 1 { // no one to take over: the API server restarts only
		plan = slices.DeleteFunc(plan, func(f plannedFault) bool { return f.kind == faultLeaderKill })
	}
	in := &injector{env: env, c: c, sa: sa, ns: ns, oracle: o, killable: killable, survivor: survivor, rng: frng,
		last: begin.Add(cfg.duration - 30*time.Second)}
	var faults []faultRecord
	var refusal faultRecord
	var refused bool
	wg.Go(func() { faults = in.run(runCtx, begin, plan, t.Logf) })
	wg.Go(func() { refusal, refused = in.refuseDeletions(runCtx, begin, cfg.duration*2/5, t.Logf) })
	smp := &sampler{pid: survivorPid, addr: survivor.MetricsAddr, token: scrapeToken, newToken: token, begin: begin, world: w, logf: t.Logf}
	wg.Go(func() { smp.run(runCtx) })
	wg.Wait()
	if refused {
		faults = append(faults, refusal)
		slices.SortFunc(faults, func(a, b faultRecord) int { return a.at.Compare(b.at) })
	}
	t.Logf("soak: churn and faults stopped after %v; draining %v", time.Since(begin).Round(time.Second), drain)
	time.Sleep(drain)
	// The record ends before the replicas stop: a pod falling due while
	// they shut down is not lost.
	o.EndWatch()
	stopStand()
	<-standDone
	for _, r := range append(slices.Clone(killable), survivor) {
		if !r.stop(20 * time.Second) {
			t.Errorf("%s did not exit within 20 s of SIGTERM", r.name)
		}
	}
	require.NoError(t, finaliser.Stop(), "the kubelet stand-in failed a deletion")
	// A run that leads soon after it started (the supervisor's restart of
	// a leader an API server restart stopped may win the Lease) counts the
	// starts it could not see from its own first sight.
	for _, r := range append(slices.Clone(killable), survivor) {
		for id, at := range r.Starts() {
			o.Started(id, at)
		}
	}
	rep, err := o.Check()
	require.NoError(t, err)

	disturbed := func(at time.Time) bool { return duringFault(faults, at) }
	res := result{cfg: cfg, begin: begin, faults: faults, samples: smp.samples, report: rep}
	res.standWrites, res.standErr = stand.result()
	res.ops = ch.counts(disturbed)
	res.claimed = ch.claimedPods()
	sampleErrs := smp.failures(disturbed)
	for _, r := range append(slices.Clone(killable), survivor) {
		res.replicas = append(res.replicas, replicaSummary{name: r.name, runs: r.Runs(), exits: r.Exits()})
	}
	text := res.String()
	t.Log("\n" + text)
	if cfg.report != "" {
		require.NoError(t, os.WriteFile(cfg.report, []byte(text), 0o644))
	}

	// The promises.
	for _, v := range rep.Violations {
		t.Errorf("oracle: %s", v)
	}
	if len(rep.Violations) > 0 {
		t.Log(podLogLines(dir, rep.Violations))
	}
	kinds := map[string]int{}
	for _, f := range faults {
		if strings.HasPrefix(f.detail, "failed") {
			t.Errorf("%s at %s %s", f.kind, f.at.Format(time.RFC3339), f.detail)
		} else if !strings.HasPrefix(f.detail, "skipped") {
			kinds[f.kind]++
		}
	}
	if kinds[faultLeaderKill] == 0 && cfg.replicas > 1 || kinds[faultAPIServer] == 0 || kinds[faultAdmission] == 0 {
		t.Errorf("faults injected: %v; want at least one leader kill, one API server restart and one admission refusal", kinds)
	}
	if n := survivor.Runs(); n != 1 {
		t.Errorf("the survivor was started %d times (exits %v): the leak samples are not of one process", n, survivor.Exits())
	}
	if len(sampleErrs) > 0 {
		t.Errorf("%d samples failed outside the faults, e.g. %s", len(sampleErrs), sampleErrs[0])
	}
	if total, failed := res.ops.total(); failed*100 > total {
		t.Errorf("%d of %d churn operations failed outside the faults (more than 1 %%): see the report", failed, total)
	}
	if len(rep.Evictions) == 0 {
		t.Error("no pod was evicted: the churn did not exercise the controller")
	}
	if dev, rule := deviceEvictions(rep); dev == 0 || rule == 0 {
		t.Errorf("%d pods evicted for a device's taint, %d of them a DeviceTaintRule's: the device churn did not exercise the controller", dev, rule)
	}
	if len(rep.HeldRules) == 0 {
		t.Error("the guard held no DeviceTaintRule: the device churn did not exercise it")
	}
	if cfg.duration >= 2*leakFrom {
		for _, m := range leakMeasures {
			base, last, ok := growth(smp.samples, leakFrom, cfg.duration, leakWindow, m.f)
			if !ok {
				t.Errorf("%s: no samples to compare", m.name)
			} else if last > base*leakBound {
				t.Errorf("%s grew from %.1f at %v to %.1f at the end (> %.0f%%)", m.name, base, leakFrom, last, (leakBound-1)*100)
			}
		}
	} else {
		t.Logf("leak check skipped: a soak of %v has no steady stretch after %v", cfg.duration, leakFrom)
	}
}
