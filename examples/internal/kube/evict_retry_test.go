package kube_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// A budget whose status is stale gets a 429 with Retry-After: 10 from the
// API server. client-go would retry it inside the call, up to 10 times;
// EvictPod asks once and returns the refusal, which the manager retries on
// its own clock without holding an eviction slot.
func TestEvictPodAsksOnceOnRetryAfter(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/default/pods/web/eviction" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		st := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10).ErrStatus
		st.Details.Causes = append(st.Details.Causes, metav1.StatusCause{Type: manager.CauseDisruptionBudget,
			Message: "The disruption budget db is still being processed by the server."})
		st.Kind, st.APIVersion = "Status", "v1"
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusTooManyRequests)
		require.NoError(t, json.NewEncoder(w).Encode(st))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	c := &kube.PodClient{API: kube.ClientsetAPI(cs)}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = c.EvictPod(ctx, "default", "web", metav1.DeleteOptions{})
	require.Error(t, err)
	assert.True(t, manager.IsRefusedByBudget(err), "%v", err)
	assert.Equal(t, int32(1), requests.Load(), "the eviction was retried inside the call")
}
