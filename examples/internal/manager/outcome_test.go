package manager_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// Tests that Pending shows what the eviction queue recorded of each attempt:
// an error, a panic, a runtime.Goexit, a disruption budget's refusal.

// trapClient is the cluster whose DeletePod and EvictPod first run a trap a
// test sets per pod, which may return an error, panic or call
// runtime.Goexit; a trap that returns nil lets the call through.
type trapClient struct {
	*cluster.Cluster
	mu    sync.Mutex
	traps map[string][]func() error // pod name → traps of its next calls
}

func (c *trapClient) trap(name string, traps ...func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.traps[name] = append(c.traps[name], traps...)
}

func (c *trapClient) spring(name string) error {
	c.mu.Lock()
	var f func() error
	if ts := c.traps[name]; len(ts) > 0 {
		f, c.traps[name] = ts[0], ts[1:]
	}
	c.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

func (c *trapClient) DeletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	if err := c.spring(name); err != nil {
		return err
	}
	return c.Cluster.DeletePod(ctx, ns, name, opts)
}

func (c *trapClient) EvictPod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	if err := c.spring(name); err != nil {
		return err
	}
	return c.Cluster.EvictPod(ctx, ns, name, opts)
}

func panics() error { panic("boom") }
func goexits() error {
	runtime.Goexit()
	return nil
}
func refuses() error { return budgetRefusal() }

// trapEnv is an env whose manager's client is a trapClient.
func trapEnv(t *testing.T, tweak ...func(*manager.Config)) (*env, *trapClient) {
	tc := &trapClient{traps: map[string][]func() error{}}
	e := newEnv(t, append([]func(*manager.Config){func(c *manager.Config) {
		tc.Cluster = c.Client.(*cluster.Cluster)
		c.Client = tc
	}}, tweak...)...)
	return e, tc
}

const (
	panicked = "timedqueue: panic: boom"
	goexited = "timedqueue: work func called runtime.Goexit"
)

// A delete that panics is a failed attempt: Pending counts it and shows the
// panic as the last error, and the retry evicts the pod.
func TestPendingShowsAPanickedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, tc := trapEnv(t)
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		tc.trap("web", panics)
		e.taint("n1")
		p := e.manager().Pending()
		require.Len(t, p, 1)
		assert.Equal(t, 1, p[0].Attempts)
		assert.Equal(t, panicked, p[0].LastError)
		e.step(time.Second) // the retry
		assert.False(t, e.exists("web"))
		assert.Empty(t, e.manager().Pending())
	})
}

// Three refusals of a disruption budget, then an eviction that panics (or
// calls runtime.Goexit): four attempts, the last one's error shown, and the
// refusals' backoff goes on from the fourth.
func TestPendingKeepsRefusalsThroughAnAbortedAttempt(t *testing.T) {
	for _, c := range []struct {
		name  string
		abort func() error
		want  string
	}{{"panic", panics, panicked}, {"goexit", goexits, goexited}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, tc := trapEnv(t, func(c *manager.Config) { c.UseEvictionAPI = true })
				e.addNode("n1")
				e.addPod("web", "n1", nil)
				tc.trap("web", refuses, refuses, refuses, c.abort, refuses)
				e.taint("n1")           // refused: retry at +1 s
				e.step(time.Second)     // refused: retry at +3 s
				e.step(2 * time.Second) // refused: retry at +7 s
				e.step(4 * time.Second) // aborted: the queue's first failure, retry at +8 s
				p := e.manager().Pending()
				require.Len(t, p, 1)
				assert.Equal(t, 4, p[0].Attempts)
				assert.Equal(t, c.want, p[0].LastError)
				e.step(time.Second) // refused a fourth time: backs off 8 s
				p = e.manager().Pending()
				require.Len(t, p, 1)
				assert.Equal(t, 5, p[0].Attempts)
				assert.Contains(t, p[0].LastError, "disruption budget")
				w, ok := e.manager().ScheduledEviction("default", "web")
				require.True(t, ok)
				assert.Equal(t, t0.Add(16*time.Second), w.NextAttempt, "the refusals' count was lost: their backoff restarted")
				e.step(8 * time.Second)
				assert.False(t, e.exists("web"))
				assert.Empty(t, e.manager().Pending())
			})
		})
	}
}

// An attempt withdrawn by a cancel (the taint went) that then panics is
// reported to no hook: the cancel has forgotten the eviction's status
// already, so the next eviction of the pod starts afresh.
func TestCancelledAttemptThatPanicsLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, tc := trapEnv(t, func(c *manager.Config) { c.UseEvictionAPI = true })
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		unblock := make(chan struct{})
		tc.trap("web", refuses, func() error { <-unblock; panic("boom") }, refuses)
		e.taint("n1")       // refused: retry at +1 s
		e.step(time.Second) // the retry blocks in EvictPod
		w, ok := e.manager().ScheduledEviction("default", "web")
		require.True(t, ok)
		require.True(t, w.Running)
		e.untaint("n1") // withdraws the running attempt
		close(unblock)
		e.settle()
		assert.Empty(t, e.manager().Pending())
		e.taint("n1") // a new eviction, refused once
		p := e.manager().Pending()
		require.Len(t, p, 1)
		assert.Equal(t, 1, p[0].Attempts, "the cancelled eviction's refusal was kept")
		assert.Contains(t, p[0].LastError, "disruption budget")
	})
}

// The queue arms a retry before it calls the retry hook, so the retry may
// start, and end, before the hook of the failure before it runs (here the
// queue's log line before the hook is held up while the clock moves on): the
// late hook must not overwrite the retry's newer outcome.
func TestLateRetryHookKeepsTheNewerOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		var once sync.Once
		held := make(chan struct{})
		log := funcr.New(func(_, args string) {
			if strings.Contains(args, "Work failed; will retry") {
				once.Do(func() { close(held); <-hold })
			}
		}, funcr.Options{Verbosity: 4})
		e, tc := trapEnv(t, func(c *manager.Config) { c.UseEvictionAPI, c.Logger = true, &log })
		e.addNode("n1")
		e.addPod("web", "n1", nil)
		tc.trap("web", panics, refuses)
		e.taint("n1") // panics; the failure's log line, before its hook, waits
		<-held
		e.step(time.Second) // the retry: refused
		close(hold)         // the first failure's hook runs now
		e.settle()
		p := e.manager().Pending()
		require.Len(t, p, 1)
		assert.Equal(t, 2, p[0].Attempts)
		assert.Contains(t, p[0].LastError, "disruption budget", "a late hook overwrote the newer refusal")
	})
}
