package binary_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseMetrics reads the Prometheus text exposition format: the samples,
// without the comments.
func parseMetrics(text string) ([]sample, error) {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("not a sample: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out, nil
}

// sum adds the values of the samples named name whose labels include
// every label of match, and reports whether there was any.
func sum(samples []sample, name string, match map[string]string) (float64, bool) {
	var total float64
	found := false
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range match {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
		found = true
	}
	return total, found
}

// httpGet returns the status and body of a GET of url.
func httpGet(ctx context.Context, url string) (int, string, error) {
	return httpGetAs(ctx, url, "")
}

// insecureClient does not verify the metrics server's certificate, which
// is self-signed, as a Prometheus scrape configured with
// insecure_skip_verify does not.
var insecureClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// httpGetAs is httpGet with token as the bearer token (none if empty).
func httpGetAs(ctx context.Context, url, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// scrape reads the controller's /metrics, as Prometheus does: over HTTPS,
// with a token allowed to.
func (p *controller) scrape(ctx context.Context) ([]sample, error) {
	code, body, err := httpGetAs(ctx, p.metricsURL(), p.token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: %d: %s", p.metricsURL(), code, body)
	}
	return parseMetrics(body)
}

// metric returns the controller's metric name (summed over the labels
// matching match), failing the test if it cannot be read or is absent.
func (p *controller) metric(ctx context.Context, name string, match map[string]string) float64 {
	p.t.Helper()
	samples, err := p.scrape(ctx)
	require.NoError(p.t, err)
	v, ok := sum(samples, name, match)
	require.True(p.t, ok, "%s: no %s%v in /metrics", p.name, name, match)
	return v
}

// pollInterval is how often a test asks a process's HTTP endpoint while it
// waits for a value: a separate process offers nothing to watch, so the
// tests retry with a deadline (the context's).
const pollInterval = 50 * time.Millisecond

// waitMetric waits until the controller's metric (as metric sums it)
// satisfies cond, and returns its value.
func (p *controller) waitMetric(ctx context.Context, name string, match map[string]string, cond func(float64) bool) float64 {
	p.t.Helper()
	var last float64
	var lastErr error
	for {
		if samples, err := p.scrape(ctx); err != nil {
			lastErr = err
		} else if v, ok := sum(samples, name, match); ok {
			last, lastErr = v, nil
			if cond(v) {
				return v
			}
		} else {
			lastErr = fmt.Errorf("no %s%v in /metrics", name, match)
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("%s: waiting for %s%v: last value %v, last error %v: %v", p.name, name, match, last, lastErr, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// apiserverMetrics reads the API server's own /metrics.
func apiserverMetrics(t *testing.T, ctx context.Context, c kubernetes.Interface) []sample {
	t.Helper()
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(t, err)
	samples, err := parseMetrics(string(raw))
	require.NoError(t, err)
	return samples
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
