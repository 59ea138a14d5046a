package tolerations_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

// The calling pattern the package doc gives (decide again on every update,
// schedule with UpdateWork(pod, now, d.At)) keeps a failing eviction's
// backoff: an untolerated pod's At is when it became due, so an unrelated
// update every second moves nothing. A delete that always fails, with the
// default retry policy, is given up after 5 attempts, reported to the
// failure hook, and tried again by the next update: a cycle of 5 attempts
// about every 16 s, not an attempt every second that is never given up.
func TestFailingEvictionKeepsItsBackoffAcrossUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		c := tolerations.NewCountdowns(clk, tolerations.Matcher{})
		var attempts, failures atomic.Int32
		q, err := timedqueue.New(func(context.Context, string) error {
			attempts.Add(1)
			return errors.New("the API server refused the delete")
		}, timedqueue.WithClock(clk), timedqueue.WithLogger(logr.Discard()))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, q.Shutdown(context.Background())) })
		q.SetFailureHook(func(timedqueue.TimedWorker[string], error) { failures.Add(1) })

		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(-time.Minute)}},
		}}}
		pod := boundPod("web", "u1", "n1", 0, t0.Add(-time.Hour))
		pod.Spec.Tolerations = nil // untolerated
		decide := func(pod *v1.Pod) {
			if d := c.Decide(node, pod); d.Action == tolerations.Never {
				q.CancelWork(pod.Name)
			} else {
				q.UpdateWork(pod.Name, clk.Now(), d.At)
			}
		}
		decide(pod)
		synctest.Wait()
		for i := range 60 {
			clk.Step(time.Second)
			synctest.Wait()
			pod = pod.DeepCopy()
			pod.Annotations = map[string]string{"update": fmt.Sprint(i)}
			decide(pod)
			synctest.Wait()
		}
		t.Logf("%d attempts, %d failures reported in 60 s", attempts.Load(), failures.Load())
		assert.GreaterOrEqual(t, failures.Load(), int32(3), "the failure hook: the eviction was never given up")
		assert.LessOrEqual(t, attempts.Load(), timedqueue.DefaultMaxAttempts*(failures.Load()+1),
			"more attempts than the retry policy allows per cycle")
	})
}
