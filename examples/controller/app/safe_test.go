package app_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

// The safe-eviction flags, through Run on the fake API server, inside
// synctest bubbles (see run_test.go). The manager's own tests cover the
// rules; these check the flags reach it and what the API server sees.

// podWrites returns the controller's writes to pods, as "verb name
// subresource".
func podWrites(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		switch a.GetVerb() {
		case "patch", "delete", "create", "update":
			out = append(out, strings.TrimSpace(a.GetVerb()+" "+actionName(a)+" "+a.GetSubresource()))
		}
	}
	return out
}

func withPrefix(msgs []string, prefix string) []string {
	var out []string
	for _, m := range msgs {
		if strings.HasPrefix(m, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// --use-eviction-api: pods go through the Eviction API, with no
// DisruptionTarget patch of our own; one a budget refuses stays, is
// retried, and with --eviction-fallback-after=30s is deleted directly 30 s
// past its deadline, with a Warning event.
func TestRunEvictionAPIWithFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		client := newFakeAPI(
			taintedNode("node-1", t0),
			boundPod("api", "uid-api", "node-1", t0, nil),
			boundPod("web", "uid-web", "node-1", t0, nil),
		)
		kubetest.RefuseEvictions(client, func(_, name string) bool { return name == "web" })
		o := testOptions()
		o.UseEvictionAPI = true
		o.EvictionFallbackAfter = 30 * time.Second
		start(t, client, o)
		synctest.Wait()

		assert.False(t, podExists(t, client, "api"), "evicted")
		assert.True(t, podExists(t, client, "web"), "refused, so still there")
		kubetest.RequireValue(t, o.Registry, 1, kube.MetricEvictions, "outcome", "evicted")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricEvictions, "outcome", "deleted")
		refused, _ := kubetest.MetricValue(t, o.Registry, kube.MetricEvictions, "outcome", "refused")
		assert.GreaterOrEqual(t, refused, 1.0)
		kubetest.RequireValue(t, o.Registry, 1, kube.MetricEvictionsPending)
		for _, w := range podWrites(client) {
			assert.True(t, strings.HasPrefix(w, "create ") && strings.HasSuffix(w, " eviction"),
				"only evictions before the fallback, got %q", w)
		}
		assert.Equal(t, []string{
			"Eviction of Pod default/web refused by a disruption budget; retrying, falls back to deleting it at " +
				t0.Add(30*time.Second).UTC().Format(time.RFC3339),
		}, withPrefix(events(t, client, "web"), "Eviction of Pod"))

		time.Sleep(30*time.Second - time.Millisecond)
		synctest.Wait()
		assert.True(t, podExists(t, client, "web"), "deleted before the fallback deadline")
		refusedLater, _ := kubetest.MetricValue(t, o.Registry, kube.MetricEvictions, "outcome", "refused")
		assert.Greater(t, refusedLater, refused, "retried while refused")

		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.False(t, podExists(t, client, "web"), "not deleted at the fallback deadline")
		kubetest.RequireValue(t, o.Registry, 1, kube.MetricEvictions, "outcome", "fallback_delete")
		kubetest.RequireValue(t, o.Registry, 1, kube.MetricEvictions, "outcome", "evicted")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricEvictionsPending)
		writes := podWrites(client)
		assert.Equal(t, []string{"patch web status", "delete web"}, writes[len(writes)-2:], "the fallback is a delete")
		assert.Contains(t, writes, "create api eviction")
		assert.NotContains(t, writes, "patch api status", "the API server sets DisruptionTarget on an eviction, not us")
		fallback := withPrefix(events(t, client, "web"), "Deleting Pod default/web")
		require.Len(t, fallback, 1)
		assert.Contains(t, fallback[0], "refused by a disruption budget for 30s past its deadline")
	})
}

// --dry-run: every decision is made and counted, nothing is written to a
// pod, and "would delete" is recorded once per pod UID, even when the pod
// changes afterwards.
func TestRunDryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		client := newFakeAPI(
			taintedNode("node-1", t0),
			boundPod("web", "uid-web", "node-1", t0, nil),
			boundPod("db", "uid-db", "node-1", t0, ptr.To(5*time.Second)),
		)
		o := testOptions()
		o.DryRun = true
		start(t, client, o)
		synctest.Wait()
		kubetest.RequireValue(t, o.Registry, 1, kube.MetricEvictions, "outcome", "dry_run")

		time.Sleep(5 * time.Second)
		synctest.Wait()
		kubetest.RequireValue(t, o.Registry, 2, kube.MetricEvictions, "outcome", "dry_run")

		assert.Empty(t, podWrites(client), "a dry run writes to no pod")
		// The pods change: decided again, but a real run would have
		// deleted them already, so nothing more is recorded.
		for _, name := range []string{"web", "db"} {
			pod, err := client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			pod.Labels = map[string]string{"changed": "yes"}
			_, err = client.CoreV1().Pods("default").Update(t.Context(), pod, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()

		assert.True(t, podExists(t, client, "web"))
		assert.True(t, podExists(t, client, "db"))
		assert.Equal(t, []string{"update web", "update db"}, podWrites(client), "a dry run writes to no pod (these are the test's)")
		for _, name := range []string{"web", "db"} {
			assert.Equal(t, []string{"Would delete Pod default/" + name + " (dry run)"},
				withPrefix(events(t, client, name), "Would delete"), name)
			assert.Empty(t, withPrefix(events(t, client, name), "Marking"), name)
		}
		kubetest.RequireValue(t, o.Registry, 2, kube.MetricEvictions, "outcome", "dry_run")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricEvictions, "outcome", "deleted")
		kubetest.RequireValue(t, o.Registry, 0, kube.MetricEvictionsPending)
	})
}

// --eviction-rate=1 --eviction-burst=1: three pods due at once go one per
// second, and the waits show in the metrics. Per namespace, each
// namespace has a bucket of its own.
func TestRunEvictionRate(t *testing.T) {
	for _, perNamespace := range []bool{false, true} {
		name := "global"
		if perNamespace {
			name = "per namespace"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				other := boundPod("other", "uid-other", "node-1", t0, nil)
				other.Namespace = "team-b"
				// Tainted once the controller runs: at start-up each pod
				// is decided twice (its node's event and its own), and a
				// second decision while the first eviction runs costs a
				// token (see the README's "Known behaviour").
				client := newFakeAPI(
					&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
					boundPod("a", "uid-a", "node-1", t0, nil),
					boundPod("b", "uid-b", "node-1", t0, nil),
					boundPod("c", "uid-c", "node-1", t0, nil),
					other,
				)
				o := testOptions()
				o.EvictionRate, o.EvictionBurst, o.EvictionRatePerNamespace = 1, 1, perNamespace
				start(t, client, o)
				synctest.Wait()
				_, err := client.CoreV1().Nodes().Update(t.Context(), taintedNode("node-1", t0), metav1.UpdateOptions{})
				require.NoError(t, err)
				left := func() int {
					var n int
					for _, ns := range []string{"default", "team-b"} {
						pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
						require.NoError(t, err)
						n += len(pods.Items)
					}
					return n
				}
				synctest.Wait()
				want := []int{3, 2, 1, 0} // one per second
				if perNamespace {
					want = []int{2, 1, 0, 0} // team-b's pod does not wait for default's
				}
				for i, n := range want {
					if i > 0 {
						time.Sleep(time.Second)
						synctest.Wait()
					}
					assert.Equal(t, n, left(), "pods left after %d s", i)
				}
				kubetest.RequireValue(t, o.Registry, 4, kube.MetricEvictions, "outcome", "deleted")
				waits := 3.0
				if perNamespace {
					waits = 2
				}
				kubetest.RequireValue(t, o.Registry, waits, kube.MetricEvictionBudgetWaits)
				// Deadline to deletion: 0, 1, 2 and 3 s (0 for team-b's
				// pod per namespace); the waits: 1, 2 (and 3) s.
				count, sum := histogram(t, o.Registry, kube.MetricEvictionDelay)
				assert.Equal(t, uint64(4), count)
				wantSum := 6.0
				if perNamespace {
					wantSum = 3
				}
				assert.InDelta(t, wantSum, sum, 1e-9)
				count, sum = histogram(t, o.Registry, kube.MetricEvictionBudgetWait)
				assert.Equal(t, uint64(waits), count)
				assert.InDelta(t, wantSum, sum, 1e-9)
			})
		})
	}
}

// The adapter's own view of the budget settings: Run refuses what the
// flags refuse.
func TestRunRejectsFallbackWithoutEvictionAPI(t *testing.T) {
	o := testOptions()
	o.EvictionFallbackAfter = time.Minute
	client := fake.NewClientset()
	err := app.RunWithClients(t.Context(), client, client, o)
	assert.ErrorContains(t, err, "--eviction-fallback-after (1m0s) needs --use-eviction-api")
	assert.Empty(t, client.Actions())
}

// histogram returns the sample count and sum of the histogram name.
func histogram(t *testing.T, g prometheus.Gatherer, name string) (uint64, float64) {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("no histogram %s", name)
	return 0, 0
}
