package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// Scenario 3. A countdown stopped before its deadline, by the taint going
// away or by the pod coming to tolerate it for ever: a "Cancelling
// deletion" event, and the pod stays through the old deadline + 2 s.
func TestCountdownCancelled(t *testing.T) {
	const key = "example.com/flaky"
	tolerate5s := corev1.Toleration{
		Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(5 * time.Second),
	}
	for _, tc := range []struct {
		name   string
		ns     string
		cancel func(h *harness, node string, pod *corev1.Pod)
	}{{
		name: "taint removed",
		ns:   "it-cancel-taint",
		cancel: func(h *harness, node string, _ *corev1.Pod) {
			_, err := testenv.UntaintNode(h.ctx, h.c, node, key, corev1.TaintEffectNoExecute)
			require.NoError(h.t, err)
		},
	}, {
		// An existing toleration's tolerationSeconds is the one part of
		// it an update may change; dropping it tolerates for ever.
		name: "pod tolerates for ever",
		ns:   "it-cancel-tolerate",
		cancel: func(h *harness, _ string, pod *corev1.Pod) {
			pods := h.c.CoreV1().Pods(pod.Namespace)
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p, err := pods.Get(h.ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				for i := range p.Spec.Tolerations {
					if p.Spec.Tolerations[i].Key == key {
						p.Spec.Tolerations[i].TolerationSeconds = nil
					}
				}
				_, err = pods.Update(h.ctx, p, metav1.UpdateOptions{})
				return err
			})
			require.NoError(h.t, err)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := setup(t, tc.ns)
			ctrl := h.startController(true, nil)
			node := h.node("node")
			pod, err := testenv.CreateBoundPod(h.ctx, h.c, testenv.NewPod(h.ns, "web", tolerate5s), node)
			require.NoError(t, err)
			w := h.watchPod(pod)
			tainted, err := testenv.TaintNode(h.ctx, h.c, node, testenv.NoExecuteTaint(key, "true"))
			require.NoError(t, err)
			start := countdownStart(t, tainted, key, pod)
			deadline := start.Add(5 * time.Second)

			// Let the controller start the countdown (it takes
			// milliseconds); the deadline is at least 4 s away.
			w.stays(t, time.Now().Add(1500*time.Millisecond))
			tc.cancel(h, node, pod)
			cancelled := time.Now()
			ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
			defer cancel()
			_, err = h.waitForEvent(ctx, pod, "Cancelling deletion")
			require.NoError(t, err, "no Cancelling deletion event")
			t.Logf("scenario 3 (%s): cancelled %s before the deadline, Cancelling deletion event after %s",
				tc.name, ms(deadline.Sub(cancelled)), ms(time.Since(cancelled)))

			w.stays(t, deadline.Add(2*time.Second))
			_, called := ctrl.deleteCalled(pod.UID)
			assert.False(t, called, "the controller tried to delete the pod")
			assert.Nil(t, w.disruptionTarget(), "the pod got a DisruptionTarget condition")
			assert.Empty(t, h.events(pod.Name, "Marking for deletion"))
			assert.Equal(t, 0.0, ctrl.evictions(t, "deleted"))
		})
	}
}
