package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/leaderelection"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
)

// Options configures [Run]. Every field but the last group has a flag; see
// [Options.Flags] for the names. Start from [NewOptions]: the zero
// Options is not valid.
type Options struct {
	// Kubeconfig is the path of a kubeconfig file; empty means the
	// in-cluster configuration (see [RESTConfig]). Run does not read it: it
	// takes a *rest.Config.
	Kubeconfig string

	// LeaderElect makes the manager run only while this replica holds the
	// Lease LeaseNamespace/LeaseName. False runs it at once, unguarded:
	// only for a single replica.
	LeaderElect bool
	// LeaseDuration is how long a standby waits after the last renewal it
	// saw before taking the lease over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives the lease up and stops acting. It must be shorter than
	// LeaseDuration, so that the old leader stops before a new one starts.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between tries to acquire or renew.
	RetryPeriod time.Duration
	// LeaseNamespace and LeaseName name the coordination.k8s.io Lease.
	LeaseNamespace, LeaseName string
	// Identity is this replica's name in the lease. It must be unique per
	// replica; the default is the host name, "_" and a random suffix.
	Identity string

	// MetricsBindAddress is the host:port of the /metrics and
	// /debug/evictions server; "0" disables it and port 0 picks a free port
	// (see Listening).
	MetricsBindAddress string
	// MetricsSecure serves /metrics and /debug/evictions over HTTPS, each
	// request authenticated by its bearer token (a TokenReview) and
	// authorized for its path (a SubjectAccessReview for the verb get on
	// the non-resource URL). False serves plain HTTP to anyone: only for a
	// local run.
	MetricsSecure bool
	// MetricsCertDir is the directory of the metrics server's certificate
	// and key (MetricsCertName and MetricsCertKey in it), reloaded when the
	// files change. Empty means a self-signed certificate made at start.
	MetricsCertDir string
	// MetricsCertName and MetricsCertKey are the file names of the
	// certificate and its key in MetricsCertDir.
	MetricsCertName, MetricsCertKey string
	// HealthProbeBindAddress is the host:port of the /healthz and /readyz
	// server; "0" disables it and port 0 picks a free port.
	HealthProbeBindAddress string

	// KubeAPIQPS and KubeAPIBurst bound the controller's requests to the
	// API server but its events': the informers' lists and watches and the
	// writes to pods. The leader election's lease requests have a client of
	// their own with the same bounds, so that a backlog of deletions cannot
	// delay lease renewals.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// EventsQPS and EventsBurst bound the event sink's requests (the events'
	// creates), on a client of its own: events neither wait behind the
	// deletions nor slow them. The sink writes with several goroutines, so
	// these bound its writes, not one request's latency.
	EventsQPS   float32
	EventsBurst int

	// Shards is the number of handler workers of the manager.
	Shards int
	// MaxConcurrentEvictions bounds the evictions (status patch and delete)
	// in flight at once.
	MaxConcurrentEvictions int
	// ShutdownGracePeriod is how long, after Run's ctx is done, evictions
	// already in flight may take to finish before their requests are
	// cancelled and the lease is released.
	ShutdownGracePeriod time.Duration

	// DryRun decides, schedules and counts evictions exactly as for real
	// but never writes to a pod: where a real run would delete or evict, it
	// records a "would delete" event, once per pod UID
	// (taintkit_evictions_total{outcome="dry_run"}). See
	// manager.Config.DryRun.
	DryRun bool
	// UseEvictionAPI evicts pods through the Eviction API (policy/v1
	// Eviction on pods/eviction), which honours PodDisruptionBudgets,
	// instead of deleting them. A refusal by a budget is retried with
	// backoff, keeping the pod's deadline. See manager.Config.UseEvictionAPI.
	UseEvictionAPI bool
	// EvictionFallbackAfter is, with UseEvictionAPI, how long past its
	// toleration deadline an eviction a disruption budget keeps refusing is
	// retried before the pod is deleted directly, with a Warning event
	// (taintkit_evictions_total{outcome="fallback_delete"}). Zero, the
	// default, means never: budgets are always honoured.
	EvictionFallbackAfter time.Duration
	// EvictionRate is the eviction budget: at most this many evictions
	// start per second (a token bucket of EvictionBurst tokens); due
	// evictions wait for a token in deadline order. Zero, the default,
	// means no limit.
	EvictionRate float64
	// EvictionBurst is the number of evictions that may start at once
	// within EvictionRate. It must be at least 1; it is ignored without an
	// EvictionRate.
	EvictionBurst int
	// EvictionRatePerNamespace gives each namespace an eviction budget of
	// its own (EvictionRate and EvictionBurst each), so that one
	// namespace's backlog never delays another's evictions.
	EvictionRatePerNamespace bool
	// EvictionRetryMaxBackoff caps the wait between the attempts of an
	// eviction that keeps failing (refused by admission, throttled, the
	// server failing) or that a disruption budget refuses. Such an eviction
	// is never given up while the pod must go; the waits double from 1 s.
	EvictionRetryMaxBackoff time.Duration
	// ResyncPeriod is how often the leader looks again, from its caches,
	// at the pods on NoExecute-tainted nodes, for any that must go and has
	// no eviction scheduled (taintkit_evictions_missed_total).
	ResyncPeriod time.Duration

	// DeviceTaints also evicts pods from DRA devices with NoExecute taints
	// they do not tolerate (ResourceSlices' device taints and
	// DeviceTaintRules), through the same manager as node taints, and
	// writes the rules' EvictionInProgress status: the job of
	// kube-controller-manager's device-taint-eviction-controller. False, the
	// default, watches no resource.k8s.io object.
	DeviceTaints bool
	// DeviceTaintRuleMaxPods is, with DeviceTaints, the most pods a
	// DeviceTaintRule's NoExecute taint may evict: a rule that would evict
	// more starts no eviction (its status says TooManyPods, with a Warning
	// event) until it is narrowed or the limit raised. Zero means no limit.
	// Slice taints are not limited.
	DeviceTaintRuleMaxPods int

	// The fields below have no flag: they are for programs and tests that
	// call Run in process.

	// Listening, if not nil, is called once both servers listen, before
	// anything else starts, with their bound addresses; an address is nil
	// for a disabled server. With port 0 it is how to learn the port.
	Listening func(metricsAddr, healthAddr net.Addr)
	// BeforeDelete, if not nil, is called after the manager's last read of
	// a pod (and after its DisruptionTarget condition is set) and right
	// before the DELETE with the pod's UID as precondition, or before the
	// eviction (with UseEvictionAPI; no condition is set then), with the
	// pod as the informer's cache last held it (a copy; only its
	// namespace, name and UID are set if the cache no longer has it). A
	// test can recreate the pod there to see the precondition refuse the
	// delete.
	BeforeDelete func(ctx context.Context, pod *v1.Pod)
	// Registry, if not nil, receives the controller's metrics ([kube.Metrics]
	// and [MetricEventsDropped]).
	// Nil means a new registry per Run, with the Go runtime's and the
	// process's metrics added, so that Runs in one process do not collide.
	// The /metrics server serves the registry either way.
	Registry *prometheus.Registry
}

// Defaults of [NewOptions].
const (
	DefaultLeaseDuration          = 15 * time.Second
	DefaultRenewDeadline          = 10 * time.Second
	DefaultRetryPeriod            = 2 * time.Second
	DefaultLeaseNamespace         = "kube-system"
	DefaultLeaseName              = "taintkit-noexecute"
	DefaultMetricsBindAddress     = ":8443"
	DefaultMetricsCertName        = "tls.crt"
	DefaultMetricsCertKey         = "tls.key"
	DefaultHealthProbeBindAddress = ":8081"
	DefaultKubeAPIQPS             = 20
	DefaultKubeAPIBurst           = 30
	// DefaultEventsQPS and DefaultEventsBurst let the events of a mass
	// eviction keep up with it: each eviction records two events (its
	// countdown and "Marking for deletion") for two pod writes, and the
	// countdowns' events all come at once when a node is tainted (the
	// sink's queues hold 16,384 events each meanwhile; eventSink).
	DefaultEventsQPS              = 100
	DefaultEventsBurst            = 200
	DefaultShards                 = sharding.DefaultShards
	DefaultMaxConcurrentEvictions = timedqueue.DefaultMaxConcurrency
	DefaultShutdownGracePeriod    = 30 * time.Second
	// DefaultEvictionFallbackAfter is zero: with --use-eviction-api a
	// disruption budget is honoured for ever unless the operator sets a
	// fallback.
	DefaultEvictionFallbackAfter = 0
	// DefaultEvictionRate is zero: no eviction budget, as upstream.
	DefaultEvictionRate = 0
	// DefaultEvictionBurst is one: with an --eviction-rate, evictions are
	// spread evenly, none start together.
	DefaultEvictionBurst = 1
	// DefaultEvictionRetryMaxBackoff caps the wait between the attempts of
	// an eviction that keeps failing: a pod refused for good draws an
	// attempt every 30 s (a few requests a minute), and a refusal that ends
	// is followed by the eviction within 30 s.
	DefaultEvictionRetryMaxBackoff = 30 * time.Second
	// DefaultResyncPeriod: a pod whose eviction was missed is found within
	// two periods.
	DefaultResyncPeriod = manager.DefaultResyncPeriod
	// DefaultDeviceTaintRuleMaxPods guards against a DeviceTaintRule that
	// selects far more devices than meant (an empty selector selects every
	// device in the cluster).
	DefaultDeviceTaintRuleMaxPods = 100
)

// NewOptions returns the defaults: leader election on, with a unique
// Identity, and the values of the Default constants.
func NewOptions() Options {
	return Options{
		LeaderElect:             true,
		LeaseDuration:           DefaultLeaseDuration,
		RenewDeadline:           DefaultRenewDeadline,
		RetryPeriod:             DefaultRetryPeriod,
		LeaseNamespace:          DefaultLeaseNamespace,
		LeaseName:               DefaultLeaseName,
		Identity:                defaultIdentity(),
		MetricsBindAddress:      DefaultMetricsBindAddress,
		MetricsSecure:           true,
		MetricsCertName:         DefaultMetricsCertName,
		MetricsCertKey:          DefaultMetricsCertKey,
		HealthProbeBindAddress:  DefaultHealthProbeBindAddress,
		KubeAPIQPS:              DefaultKubeAPIQPS,
		KubeAPIBurst:            DefaultKubeAPIBurst,
		EventsQPS:               DefaultEventsQPS,
		EventsBurst:             DefaultEventsBurst,
		Shards:                  DefaultShards,
		MaxConcurrentEvictions:  DefaultMaxConcurrentEvictions,
		ShutdownGracePeriod:     DefaultShutdownGracePeriod,
		EvictionFallbackAfter:   DefaultEvictionFallbackAfter,
		EvictionRetryMaxBackoff: DefaultEvictionRetryMaxBackoff,
		ResyncPeriod:            DefaultResyncPeriod,
		EvictionRate:            DefaultEvictionRate,
		EvictionBurst:           DefaultEvictionBurst,
		DeviceTaintRuleMaxPods:  DefaultDeviceTaintRuleMaxPods,
	}
}

func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "taintkit-noexecute"
	}
	// Two replicas on one host (or two Runs in one test) must still differ.
	return host + "_" + rand.String(8)
}

// The sections of [Options.Flags], in the order --help prints them.
const (
	FlagsGeneric        = "generic"
	FlagsLeaderElection = "leader election"
	FlagsEviction       = "eviction"
	FlagsDeviceTaints   = "device taints"
	FlagsServing        = "serving"
	FlagsLogging        = "logging"
)

// Flags returns the options' flags in named sections, as Kubernetes'
// components have them (k8s.io/component-base/cli/flag), with o's values as
// defaults; setting a flag sets o's field:
//
//	generic:         --kubeconfig, --kube-api-qps, --kube-api-burst,
//	                 --events-qps, --events-burst, --shards,
//	                 --shutdown-grace-period
//	leader election: --leader-elect, --leader-elect-lease-duration,
//	                 --leader-elect-renew-deadline, --leader-elect-retry-period,
//	                 --leader-elect-resource-namespace, --leader-elect-resource-name
//	eviction:        --max-concurrent-evictions, --dry-run, --use-eviction-api,
//	                 --eviction-fallback-after, --eviction-rate,
//	                 --eviction-burst, --eviction-rate-per-namespace
//	device taints:   --device-taints, --device-taint-rule-max-pods
//	serving:         --metrics-bind-address, --metrics-secure,
//	                 --metrics-cert-dir, --metrics-cert-name,
//	                 --metrics-cert-key, --health-probe-bind-address
//	logging:         klog's flags (-v, --vmodule and the rest)
//
// The Identity has no flag: it is made unique per process.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	fs := fss.FlagSet(FlagsGeneric)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig file. Empty means the in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Requests per second to the API server (sustained), events excepted: lists, watches and pod writes; the lease's requests have a budget of their own of the same size.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Requests to the API server allowed in a burst above --kube-api-qps.")
	fs.Float32Var(&o.EventsQPS, "events-qps", o.EventsQPS,
		"Event writes per second to the API server (sustained), on a budget of their own, outside --kube-api-qps.")
	fs.IntVar(&o.EventsBurst, "events-burst", o.EventsBurst,
		"Event writes allowed in a burst above --events-qps.")
	fs.IntVar(&o.Shards, "shards", o.Shards,
		"Number of workers handling node and pod updates.")
	fs.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", o.ShutdownGracePeriod,
		"On SIGTERM, how long evictions in flight may take to finish before the lease is released.")

	fs = fss.FlagSet(FlagsLeaderElection)
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Run the manager only while holding the leader election lease. Disable only for a single replica.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration,
		"How long a standby replica waits after the leader's last renewal before taking the lease over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline,
		"How long the leader tries to renew before it stops acting. Must be shorter than the lease duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod,
		"Interval between tries to acquire or renew the lease.")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", o.LeaseNamespace,
		"Namespace of the leader election Lease.")
	fs.StringVar(&o.LeaseName, "leader-elect-resource-name", o.LeaseName,
		"Name of the leader election Lease.")

	fs = fss.FlagSet(FlagsEviction)
	fs.IntVar(&o.MaxConcurrentEvictions, "max-concurrent-evictions", o.MaxConcurrentEvictions,
		"Maximum evictions (status patch and delete) in flight at once.")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun,
		`Decide and count evictions as for real, but never write to a pod: record a "would delete" event once per pod instead.`)
	fs.BoolVar(&o.UseEvictionAPI, "use-eviction-api", o.UseEvictionAPI,
		"Evict pods through the Eviction API, which honours PodDisruptionBudgets, instead of deleting them.")
	fs.DurationVar(&o.EvictionFallbackAfter, "eviction-fallback-after", o.EvictionFallbackAfter,
		"With --use-eviction-api: how long past a pod's toleration deadline an eviction refused by a disruption budget is retried before the pod is deleted directly. 0 means never.")
	fs.Float64Var(&o.EvictionRate, "eviction-rate", o.EvictionRate,
		"At most this many evictions start per second (a token bucket of --eviction-burst). 0 means no limit.")
	fs.IntVar(&o.EvictionBurst, "eviction-burst", o.EvictionBurst,
		"With --eviction-rate: evictions that may start at once.")
	fs.BoolVar(&o.EvictionRatePerNamespace, "eviction-rate-per-namespace", o.EvictionRatePerNamespace,
		"With --eviction-rate: give each namespace a budget of its own (--eviction-rate and --eviction-burst each).")
	fs.DurationVar(&o.EvictionRetryMaxBackoff, "eviction-retry-max-backoff", o.EvictionRetryMaxBackoff,
		"The longest wait between the attempts of an eviction that keeps failing or that a disruption budget refuses (waits double from 1s). It is retried until the pod is gone or no longer has to go.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod,
		"How often the leader looks again, from its caches, at the pods on NoExecute-tainted nodes for any that must go and has no eviction scheduled.")

	fs = fss.FlagSet(FlagsDeviceTaints)
	fs.BoolVar(&o.DeviceTaints, "device-taints", o.DeviceTaints,
		"Also evict pods from DRA devices with NoExecute taints they do not tolerate (ResourceSlices and DeviceTaintRules), and write DeviceTaintRules' status, instead of kube-controller-manager's device-taint-eviction-controller.")
	fs.IntVar(&o.DeviceTaintRuleMaxPods, "device-taint-rule-max-pods", o.DeviceTaintRuleMaxPods,
		"With --device-taints: a DeviceTaintRule whose NoExecute taint would evict more pods than this starts no eviction until it is narrowed or the limit raised. 0 means no limit.")

	fs = fss.FlagSet(FlagsServing)
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		`Address of the /metrics and /debug/evictions server ("0" disables it).`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure,
		"Serve /metrics and /debug/evictions over HTTPS to authenticated and authorized clients only (TokenReview and SubjectAccessReview). false serves plain HTTP to anyone: only for a local run.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir,
		"Directory of the metrics server's certificate and key, reloaded when they change. Empty means a self-signed certificate made at start.")
	fs.StringVar(&o.MetricsCertName, "metrics-cert-name", o.MetricsCertName,
		"File name of the certificate in --metrics-cert-dir.")
	fs.StringVar(&o.MetricsCertKey, "metrics-cert-key", o.MetricsCertKey,
		"File name of the key in --metrics-cert-dir.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		`Address of the /healthz and /readyz server, plain HTTP ("0" disables it).`)

	// klog's flags, as Go flags; -v keeps its one-dash form as a shorthand.
	goFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(goFlags)
	fs = fss.FlagSet(FlagsLogging)
	goFlags.VisitAll(func(f *flag.Flag) {
		pf := pflag.PFlagFromGoFlag(f)
		if pf.Name == "v" {
			pf.Shorthand = "v"
		}
		fs.AddFlag(pf)
	})
	return fss
}

// Validate returns every problem with o, joined (errors.Join), or nil. Run
// calls it before it starts anything.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if o.LeaderElect {
		if o.LeaseDuration <= 0 {
			bad("--leader-elect-lease-duration must be positive, got %v", o.LeaseDuration)
		}
		if o.RenewDeadline <= 0 {
			bad("--leader-elect-renew-deadline must be positive, got %v", o.RenewDeadline)
		}
		if o.RetryPeriod <= 0 {
			bad("--leader-elect-retry-period must be positive, got %v", o.RetryPeriod)
		}
		if o.LeaseDuration > 0 && o.RenewDeadline >= o.LeaseDuration {
			bad("--leader-elect-renew-deadline (%v) must be shorter than --leader-elect-lease-duration (%v)", o.RenewDeadline, o.LeaseDuration)
		}
		// client-go's elector jitters the retry period by up to this factor
		// and refuses a renew deadline that a single jittered retry can use up.
		if o.RetryPeriod > 0 && o.RenewDeadline > 0 && float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod) {
			bad("--leader-elect-retry-period (%v) must be shorter than --leader-elect-renew-deadline (%v) divided by %v", o.RetryPeriod, o.RenewDeadline, leaderelection.JitterFactor)
		}
		if o.LeaseNamespace == "" {
			bad("--leader-elect-resource-namespace must not be empty")
		}
		if o.LeaseName == "" {
			bad("--leader-elect-resource-name must not be empty")
		}
		if o.Identity == "" {
			bad("Identity must not be empty with --leader-elect")
		}
	}
	if err := validBindAddress(o.MetricsBindAddress); err != nil {
		bad("--metrics-bind-address: %w", err)
	}
	if o.MetricsCertDir != "" && !o.MetricsSecure {
		bad("--metrics-cert-dir needs --metrics-secure")
	}
	if o.MetricsCertDir != "" && (o.MetricsCertName == "" || o.MetricsCertKey == "") {
		bad("--metrics-cert-name and --metrics-cert-key must not be empty with --metrics-cert-dir")
	}
	if err := validBindAddress(o.HealthProbeBindAddress); err != nil {
		bad("--health-probe-bind-address: %w", err)
	}
	if o.MetricsBindAddress != "0" && o.MetricsBindAddress == o.HealthProbeBindAddress && !hasPortZero(o.MetricsBindAddress) {
		bad("--metrics-bind-address and --health-probe-bind-address must differ, both are %q", o.MetricsBindAddress)
	}
	if !(o.KubeAPIQPS > 0) { // also refuses NaN
		bad("--kube-api-qps must be positive, got %v", o.KubeAPIQPS)
	}
	if o.KubeAPIBurst < 1 {
		bad("--kube-api-burst must be at least 1, got %d", o.KubeAPIBurst)
	}
	if !(o.EventsQPS > 0) { // also refuses NaN
		bad("--events-qps must be positive, got %v", o.EventsQPS)
	}
	if o.EventsBurst < 1 {
		bad("--events-burst must be at least 1, got %d", o.EventsBurst)
	}
	if o.Shards < 1 {
		bad("--shards must be at least 1, got %d", o.Shards)
	}
	if o.MaxConcurrentEvictions < 1 {
		bad("--max-concurrent-evictions must be at least 1, got %d", o.MaxConcurrentEvictions)
	}
	if o.ShutdownGracePeriod < 0 {
		bad("--shutdown-grace-period must not be negative, got %v", o.ShutdownGracePeriod)
	}
	if o.EvictionRetryMaxBackoff < time.Second {
		bad("--eviction-retry-max-backoff must be at least 1s, got %v", o.EvictionRetryMaxBackoff)
	}
	if o.ResyncPeriod <= 0 {
		bad("--resync-period must be positive, got %v", o.ResyncPeriod)
	}
	if o.EvictionFallbackAfter < 0 {
		bad("--eviction-fallback-after must not be negative, got %v", o.EvictionFallbackAfter)
	}
	if o.EvictionFallbackAfter != 0 && !o.UseEvictionAPI {
		// Without the Eviction API nothing is ever refused: a fallback set
		// there is a mistake the operator should hear of.
		bad("--eviction-fallback-after (%v) needs --use-eviction-api", o.EvictionFallbackAfter)
	}
	if !(o.EvictionRate >= 0) || math.IsInf(o.EvictionRate, 0) { // also refuses NaN
		bad("--eviction-rate must be a finite number ≥ 0, got %v", o.EvictionRate)
	}
	if o.EvictionBurst < 1 {
		bad("--eviction-burst must be at least 1, got %d", o.EvictionBurst)
	}
	if o.EvictionRatePerNamespace && o.EvictionRate == 0 {
		bad("--eviction-rate-per-namespace needs an --eviction-rate")
	}
	if o.DeviceTaintRuleMaxPods < 0 {
		bad("--device-taint-rule-max-pods must not be negative, got %d", o.DeviceTaintRuleMaxPods)
	}
	return errors.Join(errs...)
}

// validBindAddress accepts "0" (disabled) and host:port with a numeric port.
func validBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf(`want host:port or "0", got %q: %w`, addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port must be a number from 0 to 65535, got %q", port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("bad host %q", host)
	}
	return nil
}

func hasPortZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}
