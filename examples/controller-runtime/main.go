// Command taintkit-controllers runs, in one controller-runtime manager, the
// NoExecute taint manager (package noexecute) and, with --expire-configmaps,
// the ConfigMap expiry controller (package expiry).
package main

import (
	"crypto/tls"
	"flag"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/taintkit/taintkit/examples/controller-runtime/expiry"
	"github.com/taintkit/taintkit/examples/controller-runtime/noexecute"
	"github.com/taintkit/taintkit/examples/controller/metricsauth"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

func main() {
	var (
		metricsAddr, probeAddr string
		leaderElect, expire    bool
		cfg                    manager.Config
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "HTTPS /metrics and /debug/evictions, behind TokenReview and SubjectAccessReview; 0 disables it")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", true, "act only while holding the Lease kube-system/taintkit-controllers")
	flag.BoolVar(&expire, "expire-configmaps", false, "also run the ConfigMap expiry controller (annotation "+expiry.Annotation+")")
	flag.IntVar(&cfg.MaxConcurrentEvictions, "max-concurrent-evictions", 32, "evictions in flight at once")
	flag.BoolVar(&cfg.DryRun, "dry-run", false, "decide and count, but never write to a pod")
	flag.BoolVar(&cfg.UseEvictionAPI, "use-eviction-api", false, "evict through the Eviction API, honouring PodDisruptionBudgets")
	flag.Float64Var(&cfg.EvictionRate, "eviction-rate", 0, "evictions started per second at most; 0 means no limit")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	restConfig := ctrl.GetConfigOrDie()
	mgrOpts := ctrl.Options{
		Metrics: metricsserver.Options{
			BindAddress:   metricsAddr,
			SecureServing: true,
			// A rejected token is 401, not controller-runtime's filter's 500.
			FilterProvider: metricsauth.NewAs[metricsserver.Filter],
			// No HTTP/2: CVE-2023-44487 and CVE-2023-39325, as kubebuilder's scaffold does.
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		},
		HealthProbeBindAddress:        probeAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              "taintkit-controllers",
		LeaderElectionNamespace:       "kube-system",
		LeaderElectionReleaseOnCancel: true, // safe: Start returns only once evictions in flight have
		Cache:                         cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	}
	// With leader election, pod and event writes leave only while the
	// last renewal of the Lease is younger than the renew deadline, and the
	// release on cancel never empties another replica's Lease.
	var fence *noexecute.LeaderFence
	if leaderElect {
		var err error
		if fence, err = noexecute.NewLeaderFence(restConfig, &mgrOpts); err != nil {
			log.Error(err, "Setting up leader election")
			os.Exit(1)
		}
	}
	if fence != nil {
		restConfig = fence.Config
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		log.Error(err, "Creating the manager")
		os.Exit(1)
	}
	if fence != nil {
		if err := mgr.Add(fence); err != nil {
			log.Error(err, "Adding the leader fence")
			os.Exit(1)
		}
	}
	if err := (&noexecute.Runnable{Config: cfg}).SetupWithManager(mgr); err != nil {
		log.Error(err, "Setting up the taint manager")
		os.Exit(1)
	}
	if expire {
		if err := (&expiry.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			log.Error(err, "Setting up the expiry controller")
			os.Exit(1)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "Adding the health check")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Running the manager")
		os.Exit(1)
	}
}
