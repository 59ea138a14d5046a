package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// admissionRefusal is how long the admission policy refuses the deletion of
// the pod named held: a policy being rolled out, a webhook that is down, a
// guard holding a pod until a backup ends.
const admissionRefusal = 45 * time.Second

// Scenario: an admission policy (a ValidatingAdmissionPolicy denying with
// 403) refuses the deletion and the eviction of two untolerated pods on a
// NoExecute-tainted node, one for 45 s, the other for good; a third pod on
// the node is not refused. Once the refusal ends the held pod is removed,
// at the next retry (capped at --eviction-retry-max-backoff); the
// neighbour goes at once, never held up; the pod refused for good draws a
// bounded number of requests (the retries' backoff, read on the API
// server's audit log) and one "Marking for deletion" event. Run with direct
// deletes and with --use-eviction-api. Each run takes about 80 s.
func TestAdmissionRefusalEndsInEviction(t *testing.T) {
	for _, evictionAPI := range []bool{false, true} {
		name := "delete"
		if evictionAPI {
			name = "eviction-api"
		}
		t.Run(name, func(t *testing.T) { testAdmissionRefusal(t, evictionAPI) })
	}
}

func testAdmissionRefusal(t *testing.T, evictionAPI bool) {
	ns := "it-refused-delete"
	if evictionAPI {
		ns = "it-refused-evict"
	}
	h := setupFor(t, ns, true, 3*time.Minute)
	node := h.node("node")
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"held", "held-forever", "neighbour"} {
		pod, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, name), node)
		require.NoError(t, err)
		pods[name] = pod
	}
	endHold := h.refuseDeletion("held")
	h.refuseDeletion("held-forever")
	h.oracle.Excuse(pods["held-forever"].UID)

	ctrl := h.startController(false, nil, func(o *app.Options) { o.UseEvictionAPI = evictionAPI })
	held, neighbour := h.watchPod(pods["held"]), h.watchPod(pods["neighbour"])
	forever := h.watchPod(pods["held-forever"])
	tainted := time.Now()
	_, err := testenv.TaintNode(h.ctx, h.c, node, testenv.NoExecuteTaint("example.com/broken", "true"))
	require.NoError(t, err)

	gone := neighbour.waitDeleted(t, 15*time.Second)
	t.Logf("neighbour deleted %s after the taint", ms(gone.Sub(tainted)))
	assert.LessOrEqual(t, gone.Sub(tainted), 2*time.Second, "the neighbour was held up")

	held.stays(t, tainted.Add(admissionRefusal))
	refusalEnded := endHold()
	bound := app.DefaultEvictionRetryMaxBackoff + 3*time.Second
	gone = held.waitDeleted(t, time.Until(refusalEnded.Add(bound+10*time.Second)))
	t.Logf("held deleted %s after the refusal ended (%s after the taint)", ms(gone.Sub(refusalEnded)), ms(gone.Sub(tainted)))
	assert.LessOrEqual(t, gone.Sub(refusalEnded), bound, "the held pod was not removed at the next retry after the refusal ended")
	h.oracle.FaultWithin("admission refuses the held pod", tainted, refusalEnded, bound)
	forever.stays(t, time.Now())
	ctrl.stop(t)
	stopped := time.Now()

	// The pod refused for good: its eviction was retried, never given up,
	// at the backoff's pace (1 s, doubling, capped at the default maximum).
	requests, err := oracle.ReadAudit(h.env.AuditLogPath())
	require.NoError(t, err)
	attempts := 0
	for _, r := range requests {
		if r.Namespace == h.ns && r.Name == "held-forever" && r.Identity == ctrl.identity &&
			(r.Kind == oracle.PodDelete || r.Kind == oracle.PodEvict) {
			attempts++
		}
	}
	// +2: a retry under way at the stop, and an attempt withdrawn at the
	// start, when a repeated decision scheduled the eviction anew.
	most := retriesWithin(stopped.Sub(tainted), app.DefaultEvictionRetryMaxBackoff) + 2
	t.Logf("held-forever: %d attempts in %s (at most %d at the default backoff)", attempts, ms(stopped.Sub(tainted)), most)
	assert.GreaterOrEqual(t, attempts, 6, "the refused eviction was given up")
	assert.LessOrEqual(t, attempts, most, "more attempts than the backoff allows")
	assert.Equal(t, 1, eventCount(h.events("held-forever", "Marking for deletion")), "one Marking for deletion per decision, not per attempt")
	assert.Equal(t, 1, eventCount(h.events("held", "Marking for deletion")))
	warnings := 0
	for _, e := range h.events("held-forever", "") {
		if e.Type == corev1.EventTypeWarning {
			warnings += max(int(e.Count), 1)
		}
	}
	assert.LessOrEqual(t, warnings, 1, "a failing eviction's Warning repeats at most every few minutes")
}

// refuseDeletion makes the API server refuse, with 403, every DELETE of the
// pod named name in the test's namespace and every eviction of it, through
// a ValidatingAdmissionPolicy, and waits until the policy is in force. The
// function it returns ends the refusal and returns when the server allows
// a (dry-run) delete again.
func (h *harness) refuseDeletion(name string) func() time.Time {
	t := h.t
	t.Helper()
	policyName := h.ns + "-hold-" + name
	policies := h.c.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := h.c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	_, err := policies.Create(h.ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete, admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods", "pods/eviction"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!((request.operation == 'DELETE' || request.subResource == 'eviction') && has(request.name) && request.name == %q)", name),
				Reason:     ptr.To(metav1.StatusReasonForbidden),
				Message:    "held until its backup ends",
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = bindings.Create(h.ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": h.ns},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// refused is called by require.Eventually's goroutine: it reports
	// with t.Errorf, never t.FailNow.
	refused := func(ctx context.Context) bool {
		err := h.c.CoreV1().Pods(h.ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
			t.Errorf("dry-run delete of %s: %v", name, err)
		}
		return apierrors.IsForbidden(err)
	}
	// remove removes the policy and returns once the server no longer
	// applies it (its caches of policies and bindings follow the deletes
	// within a second or so).
	remove := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, err := range []error{bindings.Delete(ctx, policyName, metav1.DeleteOptions{}), policies.Delete(ctx, policyName, metav1.DeleteOptions{})} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the admission policy %s: %v", policyName, err)
			}
		}
		assert.Eventually(t, func() bool { return !refused(ctx) }, 20*time.Second, 100*time.Millisecond, "the admission policy never went")
	}
	t.Cleanup(remove) // before the namespace's pods are deleted
	require.Eventually(t, func() bool { return refused(h.ctx) }, 20*time.Second, 100*time.Millisecond, "the admission policy never came into force")
	return func() time.Time {
		remove()
		return time.Now()
	}
}

// retriesWithin returns how many attempts a retry policy starting at 1 s,
// doubling and capped at maxBackoff, makes within d of the first.
func retriesWithin(d, maxBackoff time.Duration) int {
	n, at, wait := 1, time.Duration(0), time.Second
	for at+wait <= d {
		at += wait
		n++
		wait = min(2*wait, maxBackoff)
	}
	return n
}

// eventCount adds up events, each aggregated ones' count.
func eventCount(events []corev1.Event) int {
	n := 0
	for _, e := range events {
		n += max(int(e.Count), 1)
	}
	return n
}
