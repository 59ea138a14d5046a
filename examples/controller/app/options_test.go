package app_test

import (
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/examples/controller/app"
)

func TestNewOptionsDefaults(t *testing.T) {
	o := app.NewOptions()
	assert.True(t, o.LeaderElect)
	assert.Equal(t, 15*time.Second, o.LeaseDuration)
	assert.Equal(t, 10*time.Second, o.RenewDeadline)
	assert.Equal(t, 2*time.Second, o.RetryPeriod)
	assert.Equal(t, "kube-system", o.LeaseNamespace)
	assert.Equal(t, "taintkit-noexecute", o.LeaseName)
	assert.Equal(t, ":8443", o.MetricsBindAddress)
	assert.True(t, o.MetricsSecure, "metrics served securely by default")
	assert.Empty(t, o.MetricsCertDir, "a self-signed certificate by default")
	assert.Equal(t, "tls.crt", o.MetricsCertName)
	assert.Equal(t, "tls.key", o.MetricsCertKey)
	assert.Equal(t, ":8081", o.HealthProbeBindAddress)
	assert.Equal(t, float32(20), o.KubeAPIQPS)
	assert.Equal(t, 30, o.KubeAPIBurst)
	assert.Equal(t, float32(100), o.EventsQPS)
	assert.Equal(t, 200, o.EventsBurst)
	assert.Equal(t, 8, o.Shards)
	assert.Equal(t, 32, o.MaxConcurrentEvictions)
	assert.Equal(t, 30*time.Second, o.ShutdownGracePeriod)
	// Safe eviction: off by default, as upstream behaves.
	assert.False(t, o.DryRun)
	assert.False(t, o.UseEvictionAPI)
	assert.Zero(t, o.EvictionFallbackAfter, "never fall back")
	assert.Zero(t, o.EvictionRate, "no eviction budget")
	assert.Equal(t, 1, o.EvictionBurst)
	assert.False(t, o.EvictionRatePerNamespace)
	assert.Empty(t, o.Kubeconfig)
	assert.NoError(t, o.Validate())
}

func TestNewOptionsIdentityIsUnique(t *testing.T) {
	a, b := app.NewOptions().Identity, app.NewOptions().Identity
	assert.NotEqual(t, a, b, "two replicas on one host must not share an identity")
	assert.Contains(t, a, "_")
}

// flagSet returns every flag of o's sections in one set, as main parses
// them.
func flagSet(o *app.Options) *pflag.FlagSet {
	fss := o.Flags()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	return fs
}

// The flag names are a contract: deployments script against them. Each is
// in its section of --help.
func TestFlagsNamesAndSections(t *testing.T) {
	o := app.NewOptions()
	fss := o.Flags()
	assert.Equal(t, []string{app.FlagsGeneric, app.FlagsLeaderElection, app.FlagsEviction, app.FlagsDeviceTaints, app.FlagsServing, app.FlagsLogging}, fss.Order)
	for section, names := range map[string][]string{
		app.FlagsGeneric: {"kubeconfig", "kube-api-qps", "kube-api-burst", "events-qps", "events-burst", "shards", "shutdown-grace-period"},
		app.FlagsLeaderElection: {"leader-elect", "leader-elect-lease-duration", "leader-elect-renew-deadline",
			"leader-elect-retry-period", "leader-elect-resource-namespace", "leader-elect-resource-name"},
		app.FlagsEviction: {"max-concurrent-evictions", "dry-run", "use-eviction-api", "eviction-fallback-after",
			"eviction-rate", "eviction-burst", "eviction-rate-per-namespace"},
		app.FlagsDeviceTaints: {"device-taints", "device-taint-rule-max-pods"},
		app.FlagsServing: {"metrics-bind-address", "metrics-secure", "metrics-cert-dir", "metrics-cert-name",
			"metrics-cert-key", "health-probe-bind-address"},
		app.FlagsLogging: {"v", "vmodule", "logtostderr"},
	} {
		for _, name := range names {
			assert.NotNil(t, fss.FlagSets[section].Lookup(name), "flag --%s is not in the %s section", name, section)
		}
	}
	fs := flagSet(&o)
	assert.Equal(t, "v", fs.ShorthandLookup("v").Name, "-v is klog's --v")

	// The defaults shown by -help are NewOptions'.
	for name, want := range map[string]string{
		"leader-elect":                    "true",
		"device-taints":                   "false",
		"device-taint-rule-max-pods":      "100",
		"leader-elect-lease-duration":     "15s",
		"leader-elect-renew-deadline":     "10s",
		"leader-elect-retry-period":       "2s",
		"leader-elect-resource-namespace": "kube-system",
		"leader-elect-resource-name":      "taintkit-noexecute",
		"metrics-bind-address":            ":8443",
		"metrics-secure":                  "true",
		"metrics-cert-dir":                "",
		"metrics-cert-name":               "tls.crt",
		"metrics-cert-key":                "tls.key",
		"health-probe-bind-address":       ":8081",
		"kube-api-qps":                    "20",
		"kube-api-burst":                  "30",
		"events-qps":                      "100",
		"events-burst":                    "200",
		"shards":                          "8",
		"max-concurrent-evictions":        "32",
		"shutdown-grace-period":           "30s",
		"dry-run":                         "false",
		"use-eviction-api":                "false",
		"eviction-fallback-after":         "0s",
		"eviction-rate":                   "0",
		"eviction-burst":                  "1",
		"eviction-rate-per-namespace":     "false",
	} {
		assert.Equal(t, want, fs.Lookup(name).DefValue, "default of --%s", name)
	}
}

func TestFlagsParse(t *testing.T) {
	o := app.NewOptions()
	fs := flagSet(&o)
	require.NoError(t, fs.Parse([]string{
		"--kubeconfig=/etc/kube/config",
		"--leader-elect=false",
		"--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=500ms",
		"--leader-elect-resource-namespace=ops",
		"--leader-elect-resource-name=noexec",
		"--metrics-bind-address=0",
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:0",
		"--kube-api-qps=7.5",
		"--kube-api-burst=9",
		"--events-qps=12.5",
		"--events-burst=25",
		"--shards=3",
		"--max-concurrent-evictions=4",
		"--shutdown-grace-period=1m",
		"--dry-run",
		"--use-eviction-api",
		"--eviction-fallback-after=10m",
		"--eviction-rate=2.5",
		"--eviction-burst=5",
		"--eviction-rate-per-namespace",
	}))
	assert.Equal(t, "/etc/kube/config", o.Kubeconfig)
	assert.False(t, o.LeaderElect)
	assert.Equal(t, 4*time.Second, o.LeaseDuration)
	assert.Equal(t, 3*time.Second, o.RenewDeadline)
	assert.Equal(t, 500*time.Millisecond, o.RetryPeriod)
	assert.Equal(t, "ops", o.LeaseNamespace)
	assert.Equal(t, "noexec", o.LeaseName)
	assert.Equal(t, "0", o.MetricsBindAddress)
	assert.False(t, o.MetricsSecure)
	assert.Equal(t, "127.0.0.1:0", o.HealthProbeBindAddress)
	assert.Equal(t, float32(7.5), o.KubeAPIQPS)
	assert.Equal(t, 9, o.KubeAPIBurst)
	assert.Equal(t, float32(12.5), o.EventsQPS)
	assert.Equal(t, 25, o.EventsBurst)
	assert.Equal(t, 3, o.Shards)
	assert.Equal(t, 4, o.MaxConcurrentEvictions)
	assert.Equal(t, time.Minute, o.ShutdownGracePeriod)
	assert.True(t, o.DryRun)
	assert.True(t, o.UseEvictionAPI)
	assert.Equal(t, 10*time.Minute, o.EvictionFallbackAfter)
	assert.Equal(t, 2.5, o.EvictionRate)
	assert.Equal(t, 5, o.EvictionBurst)
	assert.True(t, o.EvictionRatePerNamespace)
	assert.NoError(t, o.Validate())
}

func TestFlagsRejectBadNumber(t *testing.T) {
	o := app.NewOptions()
	fs := flagSet(&o)
	err := fs.Parse([]string{"--kube-api-qps=fast"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kube-api-qps")
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*app.Options)
		want   []string // substrings of the error; none: valid
	}{
		{"defaults", func(*app.Options) {}, nil},
		{"zero lease duration", func(o *app.Options) { o.LeaseDuration = 0 }, []string{"--leader-elect-lease-duration must be positive"}},
		{"negative renew deadline", func(o *app.Options) { o.RenewDeadline = -time.Second }, []string{"--leader-elect-renew-deadline must be positive"}},
		{"zero retry period", func(o *app.Options) { o.RetryPeriod = 0 }, []string{"--leader-elect-retry-period must be positive"}},
		{"renew deadline not shorter than lease", func(o *app.Options) { o.RenewDeadline = o.LeaseDuration },
			[]string{"--leader-elect-renew-deadline (15s) must be shorter than --leader-elect-lease-duration (15s)"}},
		// client-go refuses renew <= 1.2 * retry: say so before starting.
		{"retry period too close to renew deadline", func(o *app.Options) { o.RetryPeriod = 9 * time.Second },
			[]string{"--leader-elect-retry-period (9s) must be shorter than --leader-elect-renew-deadline (10s) divided by 1.2"}},
		{"empty lease namespace", func(o *app.Options) { o.LeaseNamespace = "" }, []string{"--leader-elect-resource-namespace must not be empty"}},
		{"empty lease name", func(o *app.Options) { o.LeaseName = "" }, []string{"--leader-elect-resource-name must not be empty"}},
		{"empty identity", func(o *app.Options) { o.Identity = "" }, []string{"Identity must not be empty"}},
		// Without leader election its settings do not matter.
		{"lease settings ignored without leader election", func(o *app.Options) {
			o.LeaderElect = false
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod, o.LeaseName, o.Identity = 0, 0, 0, "", ""
		}, nil},
		{"metrics address without port", func(o *app.Options) { o.MetricsBindAddress = "8080" }, []string{"--metrics-bind-address"}},
		{"health address with bad port", func(o *app.Options) { o.HealthProbeBindAddress = ":http-alt" }, []string{"--health-probe-bind-address", "port must be a number"}},
		{"port out of range", func(o *app.Options) { o.MetricsBindAddress = ":65536" }, []string{"--metrics-bind-address"}},
		{"servers disabled", func(o *app.Options) { o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0" }, nil},
		{"free ports", func(o *app.Options) { o.MetricsBindAddress, o.HealthProbeBindAddress = "127.0.0.1:0", "127.0.0.1:0" }, nil},
		{"same address for both servers", func(o *app.Options) { o.HealthProbeBindAddress = o.MetricsBindAddress }, []string{"must differ"}},
		{"insecure metrics", func(o *app.Options) { o.MetricsSecure = false }, nil},
		{"certificate files", func(o *app.Options) { o.MetricsCertDir = "/certs" }, nil},
		{"certificate files for insecure metrics", func(o *app.Options) { o.MetricsSecure, o.MetricsCertDir = false, "/certs" },
			[]string{"--metrics-cert-dir needs --metrics-secure"}},
		{"no certificate file name", func(o *app.Options) { o.MetricsCertDir, o.MetricsCertName = "/certs", "" },
			[]string{"--metrics-cert-name and --metrics-cert-key must not be empty with --metrics-cert-dir"}},
		{"zero qps", func(o *app.Options) { o.KubeAPIQPS = 0 }, []string{"--kube-api-qps must be positive, got 0"}},
		{"negative qps", func(o *app.Options) { o.KubeAPIQPS = -1 }, []string{"--kube-api-qps must be positive, got -1"}},
		{"zero burst", func(o *app.Options) { o.KubeAPIBurst = 0 }, []string{"--kube-api-burst must be at least 1, got 0"}},
		{"zero events qps", func(o *app.Options) { o.EventsQPS = 0 }, []string{"--events-qps must be positive, got 0"}},
		{"NaN events qps", func(o *app.Options) { o.EventsQPS = float32(math.NaN()) }, []string{"--events-qps must be positive, got NaN"}},
		{"zero events burst", func(o *app.Options) { o.EventsBurst = 0 }, []string{"--events-burst must be at least 1, got 0"}},
		{"zero shards", func(o *app.Options) { o.Shards = 0 }, []string{"--shards must be at least 1, got 0"}},
		{"zero evictions", func(o *app.Options) { o.MaxConcurrentEvictions = 0 }, []string{"--max-concurrent-evictions must be at least 1, got 0"}},
		{"negative grace period", func(o *app.Options) { o.ShutdownGracePeriod = -time.Second }, []string{"--shutdown-grace-period must not be negative"}},
		{"zero grace period", func(o *app.Options) { o.ShutdownGracePeriod = 0 }, nil},
		{"eviction API with a fallback", func(o *app.Options) { o.UseEvictionAPI, o.EvictionFallbackAfter = true, time.Minute }, nil},
		{"eviction API never falling back", func(o *app.Options) { o.UseEvictionAPI = true }, nil},
		{"negative fallback", func(o *app.Options) { o.UseEvictionAPI, o.EvictionFallbackAfter = true, -time.Second },
			[]string{"--eviction-fallback-after must not be negative, got -1s"}},
		// Without the Eviction API nothing is refused: a fallback is a mistake.
		{"fallback without the eviction API", func(o *app.Options) { o.EvictionFallbackAfter = time.Minute },
			[]string{"--eviction-fallback-after (1m0s) needs --use-eviction-api"}},
		{"rate and burst", func(o *app.Options) { o.EvictionRate, o.EvictionBurst = 10, 5 }, nil},
		{"fractional rate", func(o *app.Options) { o.EvictionRate = 0.1 }, nil},
		{"negative rate", func(o *app.Options) { o.EvictionRate = -1 }, []string{"--eviction-rate must be a finite number ≥ 0, got -1"}},
		{"NaN rate", func(o *app.Options) { o.EvictionRate = math.NaN() }, []string{"--eviction-rate must be a finite number ≥ 0, got NaN"}},
		{"infinite rate", func(o *app.Options) { o.EvictionRate = math.Inf(1) }, []string{"--eviction-rate must be a finite number ≥ 0, got +Inf"}},
		{"zero burst", func(o *app.Options) { o.EvictionBurst = 0 }, []string{"--eviction-burst must be at least 1, got 0"}},
		{"burst without a rate is ignored", func(o *app.Options) { o.EvictionBurst = 50 }, nil},
		{"rate per namespace", func(o *app.Options) { o.EvictionRate, o.EvictionRatePerNamespace = 1, true }, nil},
		{"per namespace without a rate", func(o *app.Options) { o.EvictionRatePerNamespace = true },
			[]string{"--eviction-rate-per-namespace needs an --eviction-rate"}},
		{"dry run with everything", func(o *app.Options) {
			o.DryRun, o.UseEvictionAPI, o.EvictionFallbackAfter, o.EvictionRate, o.EvictionRatePerNamespace = true, true, time.Minute, 1, true
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := app.NewOptions()
			tc.change(&o)
			err := o.Validate()
			if len(tc.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	o := app.NewOptions()
	o.Shards, o.KubeAPIBurst, o.MetricsBindAddress = 0, -1, "nope"
	err := o.Validate()
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	assert.Len(t, lines, 3, "one line per problem: %q", err)
	assert.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "--shards") }))
	assert.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "--kube-api-burst") }))
	assert.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "--metrics-bind-address") }))
}
