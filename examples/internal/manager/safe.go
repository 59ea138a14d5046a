package manager

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/tolerations"
)

// PodEvicter is implemented by a [PodClient] that can evict pods through the
// Eviction API (policy/v1 Eviction on the pod's eviction subresource), which
// honours PodDisruptionBudgets. [Config.UseEvictionAPI] needs it; a
// PodClient without it keeps working as before.
type PodEvicter interface {
	// EvictPod evicts the pod with opts (the manager sets a UID
	// precondition: a mismatch fails with a Conflict error and evicts
	// nothing). A missing pod fails with a NotFound error. An eviction a
	// disruption budget refuses fails with a TooManyRequests (429) error
	// whose status details carry a cause of type DisruptionBudget, as the
	// API server's does: see [IsRefusedByBudget].
	EvictPod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
}

// CauseDisruptionBudget is the status cause type the API server puts on a
// 429 that refuses an eviction for a PodDisruptionBudget
// (policy/v1.DisruptionBudgetCause).
const CauseDisruptionBudget metav1.CauseType = "DisruptionBudget"

// IsRefusedByBudget reports whether err is the Eviction API's refusal for a
// disruption budget: a 429 with a DisruptionBudget cause. A 429 without it is
// API throttling (priority and fairness, a client-side limiter), an ordinary
// failure.
func IsRefusedByBudget(err error) bool {
	if !apierrors.IsTooManyRequests(err) {
		return false
	}
	return apierrors.HasStatusCause(err, CauseDisruptionBudget)
}

// PendingEviction is one scheduled eviction, as [Manager.Pending] shows it.
type PendingEviction struct {
	Namespace, Name string
	UID             types.UID // of the pod the eviction was scheduled for; empty if it is gone
	Node            string    // the pod's node; empty if the pod is gone
	// Taint is the NoExecute taint whose countdown ends at Deadline. Its
	// Key is empty if the taint is no longer on the node (the eviction will
	// decide again when it fires).
	Taint v1.Taint
	// Device is the device whose taint Taint is, and Rule the
	// DeviceTaintRule that put it there ("" for a taint of the device's
	// ResourceSlice); both zero for a node's taint.
	Device tolerations.DeviceID
	Rule   string
	// Deadline is when the pod is due to go: the end of its toleration, or
	// when the untolerated taint was seen. Refusals, retries and waits for
	// an eviction budget do not move it.
	Deadline time.Time
	// Attempts counts the attempts made so far: failed ones and the ones a
	// disruption budget refused.
	Attempts int
	// LastError is the error of the last attempt that failed or was
	// refused, as the eviction queue recorded it (a panic or a
	// runtime.Goexit in the client included), or "" if none was.
	LastError string
	// FailingSince is when the eviction's attempts started failing (a
	// refusal by admission, a request that failed), the first failure of
	// those since; zero while it is not failing. A disruption budget's
	// refusals are not failures.
	FailingSince time.Time
	// Failed reports that the eviction was given up: its attempts ran out
	// (EvictionRetry's MaxAttempts), with a Warning event and a count in
	// [Stats].Failed. The pod stays until its next update or the next
	// resync decides again.
	Failed bool
}

// Metrics receives the observations of a [Manager] that its [Stats] cannot
// give. Its methods are called without the manager's locks held and must not
// block. A Prometheus adapter implements them with histograms in seconds.
type Metrics interface {
	// EvictionDelay observes, for each pod the manager removes (or, in a
	// dry run, would remove), the time from its deadline to its deletion
	// or eviction, in seconds (≥ 0).
	EvictionDelay(seconds float64)
	// BudgetWait observes, for each eviction that had to wait for a token
	// of an eviction budget, how long it waited, in seconds.
	BudgetWait(seconds float64)
}
