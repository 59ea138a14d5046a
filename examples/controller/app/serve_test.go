package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/taintkit/taintkit/examples/controller/app"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// The servers, on real sockets and the real clock: nothing here waits for
// time, only for events (the pod's deletion, Run's return).
func TestRunServesMetricsAndProbes(t *testing.T) {
	client := newFakeAPI(taintedNode("node-1", time.Now()), boundPod("web", "uid-web", "node-1", time.Now(), nil))
	// Hold the first pod list until the test has seen /readyz fail.
	listed := make(chan struct{})
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-listed
		return false, nil, nil
	})
	deleted, err := client.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer deleted.Stop()

	o := testOptions()
	o.Registry = nil // Run's own registry, with the Go runtime's metrics
	o.LeaderElect = true
	o.Identity = "replica-a"
	o.MetricsBindAddress, o.HealthProbeBindAddress = "127.0.0.1:0", "127.0.0.1:0"
	addrs := make(chan [2]net.Addr, 1)
	o.Listening = func(metrics, health net.Addr) { addrs <- [2]net.Addr{metrics, health} }
	r := start(t, client, o)
	a := <-addrs
	metricsURL, healthURL := "http://"+a[0].String(), "http://"+a[1].String()

	code, body := get(t, healthURL+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "ready before the caches synced: %s", body)
	code, _ = get(t, healthURL+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	close(listed)
	for ev := range deleted.ResultChan() {
		if ev.Type == watch.Deleted && ev.Object.(*v1.Pod).Name == "web" {
			break
		}
	}
	// The manager ran, so the caches had synced.
	code, _ = get(t, healthURL+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, healthURL+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, body = get(t, metricsURL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		app.MetricEvictionsPending + " ",
		app.MetricEvictions + `{outcome="evicted"}`,
		app.MetricLeader + " 1",
		"go_goroutines ",
	} {
		assert.Contains(t, body, want)
	}

	require.NoError(t, r.stop())
	_, err = http.Get(healthURL + "/healthz")
	assert.Error(t, err, "the health server still serves after Run returned")
	_, err = http.Get(metricsURL + "/metrics")
	assert.Error(t, err, "the metrics server still serves after Run returned")
}

func TestRunListeningDisabledServers(t *testing.T) {
	o := testOptions() // both servers "0"
	got := make(chan [2]net.Addr, 1)
	o.Listening = func(metrics, health net.Addr) { got <- [2]net.Addr{metrics, health} }
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // stops before the caches sync
	client := newFakeAPI()
	require.NoError(t, app.RunWithClients(ctx, client, client, o))
	assert.Equal(t, [2]net.Addr{nil, nil}, <-got)
}
