package actat_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/examples/internal/actat"
)

func TestDue(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 500_000_000, time.UTC)
	now := metav1.Now()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		deleting    bool
		due         bool
		err         bool
	}{
		{name: "no annotation"},
		{name: "due", annotations: map[string]string{actat.Annotation: "2026-01-02T15:04:05.5Z"}, due: true},
		{name: "acted on", annotations: map[string]string{actat.Annotation: "2026-01-02T15:04:05.5Z", actat.ActedAnnotation: "2026-01-02T15:04:05.5Z"}},
		// Acted on for another time: the new one is due.
		{name: "moved since acted on", annotations: map[string]string{actat.Annotation: "2026-01-02T15:04:05.5Z", actat.ActedAnnotation: "2026-01-01T00:00:00Z"}, due: true},
		{name: "being deleted", annotations: map[string]string{actat.Annotation: "2026-01-02T15:04:05.5Z"}, deleting: true},
		{name: "not a time", annotations: map[string]string{actat.Annotation: "tomorrow"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if tc.deleting {
				cm.DeletionTimestamp = &now
			}
			got, due, err := actat.Due(cm)
			assert.Equal(t, tc.err, err != nil, "error %v", err)
			assert.Equal(t, tc.due, due)
			if tc.due {
				assert.True(t, got.Equal(at), "Due = %v, want %v", got, at)
			}
		})
	}
}

func TestActedPatch(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42",
		Annotations: map[string]string{actat.Annotation: "2026-01-02T15:04:05Z", "other": "x"}}}
	require.JSONEq(t, `{"metadata":{"resourceVersion":"42","annotations":{"taintkit.example/acted-at":"2026-01-02T15:04:05Z"}}}`,
		string(actat.ActedPatch(cm)))
}
