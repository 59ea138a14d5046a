package kubetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MetricValue returns the value of the sample of the family name whose
// labels include labels (name, value pairs), and whether there is one. A
// histogram's value is its sample count.
func MetricValue(t testing.TB, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue samples
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// RequireValue fails t at once if g has no sample of name with labels (see
// MetricValue), and asserts that its value is want.
func RequireValue(t testing.TB, g prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := MetricValue(t, g, name, labels...)
	require.True(t, ok, "no sample of %s%v", name, labels)
	assert.Equal(t, want, got, "%s%v", name, labels)
}
