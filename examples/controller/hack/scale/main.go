// Command scale measures taintkit-noexecute beside Kubernetes' own
// taint-eviction controller (bench/upstream-controller) against a real
// kube-apiserver and etcd (internal/testenv) holding NODES nodes and PODS
// pods, one controller at a time. hack/scale.sh builds both controllers and
// runs it; examples/controller/README.md ("At scale") says what it measures
// and what it found.
//
// The phases, in order:
//
//  1. start-up: each controller started --rounds times, alternating, on the
//     same cluster: time, CPU-seconds and RSS when its caches synced (its
//     log line) and when it went idle (every initial object handled); with
//     no pods and in the first round also --idle of steady state (RSS, CPU,
//     goroutines); with --taintkit-before, an earlier build beside it;
//  2. the zone outage, for taintkit-noexecute, upstream's controller, and
//     taintkit-noexecute with --eviction-rate=50 --eviction-burst=50, each
//     on a cluster of its own (the first reuses phase 1's): every tenth
//     node tainted node.kubernetes.io/unreachable:NoExecute at once, its
//     pods' deletions watched, the API server's audit log counted by
//     client, the oracle's checks run.
//
// Results go to --out: results.csv (one figure a row, with the API
// server's and etcd's CPU and RSS beside it), deletions.csv (every tainted
// pod's deadline and deletion, for the plot) and the controllers' logs. It
// exits 1 if an outage lost a pod or deleted one early, or if the oracle
// faults taintkit-noexecute.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

type config struct {
	nodes, pods, rounds, workers int
	qps, burst                   int
	idle, long, timeout, settle  time.Duration
	ours, upstream, out, deploy  string
	phases, outages              string
	before                       string
	outageEvery                  int
}

func main() {
	var cfg config
	flag.IntVar(&cfg.nodes, "nodes", 100, "nodes")
	flag.IntVar(&cfg.pods, "pods", 3000, "pods, spread evenly over the nodes")
	flag.IntVar(&cfg.rounds, "rounds", 5, "start-up runs of each controller, alternating")
	flag.IntVar(&cfg.workers, "workers", 32, "parallel requests creating the cluster")
	flag.IntVar(&cfg.qps, "kube-api-qps", 100, "the controllers' --kube-api-qps")
	flag.IntVar(&cfg.burst, "kube-api-burst", 100, "the controllers' --kube-api-burst")
	flag.DurationVar(&cfg.idle, "idle", 150*time.Second, "how long steady state is measured (longer than the Go runtime's forced GC period, 2 min, so that the start-up's garbage is collected and returned)")
	flag.DurationVar(&cfg.long, "long-toleration", time.Minute, "the unreachable toleration of the pods that do not leave at once")
	flag.DurationVar(&cfg.timeout, "outage-timeout", 20*time.Minute, "how long an outage may take")
	flag.IntVar(&cfg.outageEvery, "outage-every", 10, "the outage taints every this many nodes (1: all of them)")
	flag.DurationVar(&cfg.settle, "settle", 5*time.Second, "how long after an outage's last deletion its requests are still counted (the events still queued)")
	flag.StringVar(&cfg.ours, "taintkit", "", "taintkit-noexecute's binary (default: built)")
	flag.StringVar(&cfg.upstream, "upstream", "", "bench/upstream-controller's binary (required)")
	flag.StringVar(&cfg.before, "taintkit-before", "", "an earlier build of taintkit-noexecute, started beside it in the start-up phase as taintkit-before (hack/footprint.sh)")
	flag.StringVar(&cfg.out, "out", "scale-results", "directory for the results")
	flag.StringVar(&cfg.deploy, "deploy", "deploy", "examples/controller/deploy, for the controller's RBAC")
	flag.StringVar(&cfg.phases, "phases", "startup,outage", "startup, outage, or both")
	flag.StringVar(&cfg.outages, "outages", "taintkit,upstream,taintkit-rate50", "the controllers whose outage is measured, in order")
	flag.Parse()
	if cfg.outageEvery < 1 {
		fmt.Fprintln(os.Stderr, "scale: --outage-every must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// kind is a controller as the harness runs it.
type kind struct {
	name, bin, syncedLine, metricsFlag string
	args                               func(cl *cluster) []string
	upstream                           bool
}

func kinds(cfg config) (ours, upstream, trimmed, rated, before kind) {
	q, b := strconv.Itoa(cfg.qps), strconv.Itoa(cfg.burst)
	oursArgs := func(extra ...string) func(cl *cluster) []string {
		return func(cl *cluster) []string {
			return append([]string{"--kubeconfig=" + cl.ourConfig, "--leader-elect=false",
				"--kube-api-qps=" + q, "--kube-api-burst=" + b,
				"--metrics-secure=false", "--health-probe-bind-address=0"}, extra...)
		}
	}
	upArgs := func(trim string) func(cl *cluster) []string {
		return func(cl *cluster) []string {
			return []string{"--kubeconfig=" + cl.upstreamConf, "--kube-api-qps=" + q, "--kube-api-burst=" + b, "--trim=" + trim}
		}
	}
	ours = kind{name: "taintkit", bin: cfg.ours, syncedLine: "Informer caches synced", metricsFlag: "--metrics-bind-address", args: oursArgs()}
	rated = ours
	rated.name, rated.args = "taintkit-rate50", oursArgs("--eviction-rate=50", "--eviction-burst=50")
	upstream = kind{name: "upstream", bin: cfg.upstream, syncedLine: "Caches are synced", metricsFlag: "--metrics-bind-address", args: upArgs("managedfields"), upstream: true}
	trimmed = upstream
	trimmed.name, trimmed.args = "upstream-trimmed", upArgs("unread")
	before = ours
	before.name, before.bin = "taintkit-before", cfg.before
	return ours, upstream, trimmed, rated, before
}

func run(ctx context.Context, cfg config) error {
	if cfg.upstream == "" {
		return fmt.Errorf("scale: --upstream is required (hack/scale.sh builds it)")
	}
	if cfg.ours == "" {
		bin, err := testenv.BuildController(false)
		if err != nil {
			return err
		}
		cfg.ours = bin
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	rep, err := newReport(cfg)
	if err != nil {
		return err
	}
	defer rep.close()
	ours, upstream, trimmed, rated, before := kinds(cfg)
	started := []kind{ours, upstream, trimmed}
	if cfg.before != "" {
		started = []kind{ours, before, upstream, trimmed}
	}

	cl, err := newPopulated(ctx, cfg, rep, "cluster-1", func(cl *cluster) error {
		// Each controller's memory with no pods: what a per-pod slope
		// is measured from.
		if !hasPhase(cfg, "startup") {
			return nil
		}
		for _, k := range started {
			if k.name == trimmed.name {
				continue // with no pods, nothing to trim
			}
			if err := startup(ctx, cfg, rep, cl, k, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	stopCluster := func() {
		if cl != nil {
			_ = cl.env.Stop()
			// etcd's data is gigabytes at full size; the logs stay.
			_ = os.RemoveAll(filepath.Join(cl.dir, "etcd"))
			cl = nil
		}
	}
	defer stopCluster()
	if hasPhase(cfg, "startup") {
		for round := 1; round <= cfg.rounds; round++ {
			for _, k := range started {
				if err := startup(ctx, cfg, rep, cl, k, round); err != nil {
					return err
				}
			}
		}
	}
	if !hasPhase(cfg, "outage") {
		return nil
	}
	var outages []kind
	for _, k := range []kind{ours, before, upstream, rated} {
		if slices.Contains(strings.Split(cfg.outages, ","), k.name) {
			outages = append(outages, k)
		}
	}
	for i, k := range outages {
		if i > 0 {
			stopCluster()
			if cl, err = newPopulated(ctx, cfg, rep, "cluster-"+strconv.Itoa(i+1), nil); err != nil {
				return err
			}
		}
		if err := zoneOutage(ctx, cfg, rep, cl, k); err != nil {
			return err
		}
	}
	return nil
}

func hasPhase(cfg config, phase string) bool {
	return slices.Contains(strings.Split(cfg.phases, ","), phase)
}

// newPopulated starts a cluster, calls empty (if not nil) while it holds
// no nodes or pods, and creates the nodes and pods.
func newPopulated(ctx context.Context, cfg config, rep *report, name string, empty func(*cluster) error) (*cluster, error) {
	cl, err := startCluster(ctx, filepath.Join(cfg.out, name), cfg.deploy)
	if err != nil {
		return nil, err
	}
	if empty != nil {
		if err := empty(cl); err != nil {
			_ = cl.env.Stop()
			return nil, err
		}
	}
	start := time.Now()
	if err := cl.populate(ctx, cfg.nodes, cfg.pods, cfg.workers, cfg.long); err != nil {
		_ = cl.env.Stop()
		return nil, err
	}
	api, etcd := cl.env.PIDs()
	rep.add("cluster", name, "populate", time.Since(start).Seconds(), "s", readServers(api, etcd))
	rep.logf("%s: %d nodes, %d pods created in %v", name, cfg.nodes, cfg.pods, time.Since(start).Round(time.Second))
	return cl, nil
}

// startTimeout bounds a controller's start until it is idle.
const startTimeout = 15 * time.Minute

// launch starts k on cl, its logs in dir, and waits until its caches synced.
func launch(ctx context.Context, k kind, cl *cluster, dir string) (*controllerProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := startController(k.name, k.bin, dir, k.args(cl), k.metricsFlag, k.syncedLine)
	if err != nil {
		return nil, err
	}
	if err := p.waitSynced(ctx); err != nil {
		p.stop(30 * time.Second)
		return nil, err
	}
	return p, nil
}

// startup starts k on cl, measures its start-up (and, in round 1, its
// steady state), and stops it. Round 0 is the run on the empty cluster.
func startup(ctx context.Context, cfg config, rep *report, cl *cluster, k kind, round int) error {
	api, etcd := cl.env.PIDs()
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	p, err := launch(wctx, k, cl, filepath.Join(cfg.out, fmt.Sprintf("startup-%d", round)))
	if err != nil {
		return err
	}
	defer p.stop(30 * time.Second)
	atSync := p.usage()
	run := "round-" + strconv.Itoa(round)
	if round == 0 {
		run = "no-pods"
	}
	srv := readServers(api, etcd)
	rep.add(k.name, run, "startup_synced_seconds", p.syncedAt.Sub(p.started).Seconds(), "s", srv)
	rep.add(k.name, run, "startup_synced_cpu_seconds", atSync.CPU.Seconds(), "s", srv)
	rep.add(k.name, run, "startup_synced_rss_mib", mib(atSync.RSS), "MiB", srv)
	idleAt, err := p.waitIdle(wctx)
	if err != nil {
		return err
	}
	atIdle := p.usage()
	srv = readServers(api, etcd)
	rep.add(k.name, run, "startup_idle_seconds", idleAt.Sub(p.started).Seconds(), "s", srv)
	rep.add(k.name, run, "startup_idle_cpu_seconds", atIdle.CPU.Seconds(), "s", srv)
	rep.add(k.name, run, "startup_idle_rss_mib", mib(atIdle.RSS), "MiB", srv)
	rep.add(k.name, run, "startup_peak_rss_mib", mib(atIdle.Peak), "MiB", srv)
	rep.logf("%s %s: synced %.1f s (CPU %.1f s, RSS %.0f MiB); idle %.1f s (CPU %.1f s, RSS %.0f MiB, peak %.0f MiB)", k.name, run,
		p.syncedAt.Sub(p.started).Seconds(), atSync.CPU.Seconds(), mib(atSync.RSS),
		idleAt.Sub(p.started).Seconds(), atIdle.CPU.Seconds(), mib(atIdle.RSS), mib(atIdle.Peak))
	if round > 1 {
		return nil
	}
	steady := "steady"
	if round == 0 {
		steady = "no-pods-steady"
	}
	srvBefore := readServers(api, etcd)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.idle):
	}
	end := p.usage()
	srv = readServers(api, etcd)
	cpuPerMin := (end.CPU - atIdle.CPU).Seconds() / time.Since(idleAt).Minutes()
	rep.add(k.name, steady, "steady_rss_mib", mib(end.RSS), "MiB", srv)
	if round == 1 {
		rep.add(k.name, steady, "steady_rss_kib_per_pod", float64(end.RSS)/1024/float64(cl.pods), "KiB", srv)
	}
	rep.add(k.name, steady, "steady_cpu_seconds_per_minute", cpuPerMin, "s", srv)
	rep.add(k.name, steady, "steady_goroutines", float64(p.goroutines(ctx)), "", srv)
	rep.add("apiserver", steady+"-"+k.name, "idle_cpu_seconds_per_minute", (srv.APIServer.CPU-srvBefore.APIServer.CPU).Seconds()/cfg.idle.Minutes(), "s", srv)
	rep.logf("%s %s: RSS %.0f MiB, CPU %.3f s a minute", k.name, steady, mib(end.RSS), cpuPerMin)
	return nil
}

// zoneOutage runs k on cl, waits until it is idle, and measures an outage.
func zoneOutage(ctx context.Context, cfg config, rep *report, cl *cluster, k kind) error {
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	p, err := launch(wctx, k, cl, filepath.Join(cfg.out, "outage-"+k.name))
	if err != nil {
		return err
	}
	defer p.stop(30 * time.Second)
	if _, err := p.waitIdle(wctx); err != nil {
		return err
	}
	user := "system:serviceaccount:kube-system:" + oursSA
	perPod := 2.0 // a status patch and a delete
	if k.upstream {
		user = "system:serviceaccount:kube-system:" + upstreamSA
		perPod = 4 // a get, a status patch, a delete, and its event on the same client
	}
	o, err := oracle.Start(ctx, oracle.Options{Client: cl.c, AuditLog: cl.env.AuditLogPath(), Namespace: namespace, ControllerUser: user})
	if err != nil {
		return err
	}
	rate := float64(cfg.qps)
	if k.name == "taintkit-rate50" {
		rate = 50
		perPod = 1
	}
	backlog := func(pods int) time.Duration {
		return time.Duration(perPod*float64(pods)/(rate*0.9)*float64(time.Second)) + cfg.long
	}
	out, err := runOutage(ctx, cl, p, o, cfg.outageEvery, cfg.long, cfg.timeout, cfg.settle, backlog)
	if err != nil {
		return err
	}
	rep.outage(k, cl, out, cfg)
	return judge(k, out)
}

// judge fails a run that lost or hastened a deletion, or, for
// taintkit-noexecute, that the oracle faults; upstream's controller sends no
// UID precondition and holds no Lease, so only never early and never lost
// apply to it, and the watch's figures are those.
func judge(k kind, out *outage) error {
	s := out.summarise()
	var problems []string
	if s.Missing > 0 {
		problems = append(problems, fmt.Sprintf("%d tainted pods never deleted", s.Missing))
	}
	if s.Early > 0 {
		problems = append(problems, fmt.Sprintf("%d pods deleted before their deadline", s.Early))
	}
	if !k.upstream && len(out.Violations) > 0 {
		problems = append(problems, fmt.Sprintf("%d oracle violations", len(out.Violations)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("scale: %s outage: %s (see summary.txt)", k.name, strings.Join(problems, "; "))
	}
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
