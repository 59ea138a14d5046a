package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/sharding"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// keyOf is the shard key of the test items: "node/pod" → "node", "node" → "node".
func keyOf(item string) string {
	node, _, _ := strings.Cut(item, "/")
	return node
}

// shardOf computes an item's shard with the standard library's FNV-1a, the
// oracle for the dispatcher's routing.
func shardOf(key string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(shards))
}

// keyOnShard returns the i-th key (counting from 0) of the form prefix-N that
// lands on shard want of n.
func keyOnShard(prefix string, want, n, i int) string {
	for k := 0; ; k++ {
		key := fmt.Sprintf("%s-%d", prefix, k)
		if shardOf(key, n) == want {
			if i == 0 {
				return key
			}
			i--
		}
	}
}

// fakeMetrics records every metric per lane.
type fakeMetrics struct {
	mu       sync.Mutex
	depth    map[sharding.Lane]int
	retries  map[sharding.Lane]int
	drops    map[sharding.Lane]int
	duration map[sharding.Lane][]float64
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{
		depth:    map[sharding.Lane]int{},
		retries:  map[sharding.Lane]int{},
		drops:    map[sharding.Lane]int{},
		duration: map[sharding.Lane][]float64{},
	}
}

type metricFunc struct {
	m   *fakeMetrics
	add func(delta int)
}

func (f metricFunc) Inc() { f.m.mu.Lock(); f.add(1); f.m.mu.Unlock() }
func (f metricFunc) Dec() { f.m.mu.Lock(); f.add(-1); f.m.mu.Unlock() }

type histFunc struct {
	m    *fakeMetrics
	lane sharding.Lane
}

func (h histFunc) Observe(v float64) {
	h.m.mu.Lock()
	h.m.duration[h.lane] = append(h.m.duration[h.lane], v)
	h.m.mu.Unlock()
}

func (m *fakeMetrics) NewDepthMetric(_ string, l sharding.Lane) sharding.Gauge {
	return metricFunc{m, func(d int) { m.depth[l] += d }}
}
func (m *fakeMetrics) NewDurationMetric(_ string, l sharding.Lane) sharding.Histogram {
	return histFunc{m, l}
}
func (m *fakeMetrics) NewRetriesMetric(_ string, l sharding.Lane) sharding.Counter {
	return metricFunc{m, func(d int) { m.retries[l] += d }}
}
func (m *fakeMetrics) NewDropsMetric(_ string, l sharding.Lane) sharding.Counter {
	return metricFunc{m, func(d int) { m.drops[l] += d }}
}

func (m *fakeMetrics) get(which map[sharding.Lane]int, l sharding.Lane) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return which[l]
}

// env is a test's fake clock, event recorder, captured logs, drops and metrics.
type env struct {
	clk     *testingclock.FakeClock
	metrics *fakeMetrics

	mu     sync.Mutex
	events []string
	logs   []string
	drops  []sharding.Drop[string, string]
}

func newEnv() *env {
	return &env{clk: testingclock.NewFakeClock(t0), metrics: newFakeMetrics()}
}

func (e *env) record(ev string) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
}

func (e *env) recorded() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

func (e *env) dropped() []sharding.Drop[string, string] {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sharding.Drop[string, string](nil), e.drops...)
}

func (e *env) logged() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.logs, "\n")
}

func (e *env) logger() *logr.Logger {
	l := funcr.New(func(prefix, args string) {
		e.mu.Lock()
		e.logs = append(e.logs, prefix+" "+args)
		e.mu.Unlock()
	}, funcr.Options{})
	return &l
}

// config returns a one-shard config whose handlers record "H:item" or
// "L:item" and succeed; tests replace what they need.
func (e *env) config() sharding.Config[string, string] {
	return sharding.Config[string, string]{
		Shards:     1,
		HighKey:    keyOf,
		LowKey:     keyOf,
		HandleHigh: func(_ context.Context, n string) error { e.record("H:" + n); return nil },
		HandleLow:  func(_ context.Context, p string) error { e.record("L:" + p); return nil },
		Clock:      e.clk,
		Logger:     e.logger(),
		Metrics:    e.metrics,
		OnDrop: func(d sharding.Drop[string, string]) {
			e.mu.Lock()
			e.drops = append(e.drops, d)
			e.mu.Unlock()
		},
	}
}

// run starts d.Run and returns a func that cancels it and waits for it to
// return; it is also registered with t.Cleanup (calling it twice is fine).
func run(t *testing.T, d *sharding.Dispatcher[string, string]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// gate makes a handler block on item until released.
type gate struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

func newGate(items ...string) *gate {
	g := &gate{chans: map[string]chan struct{}{}}
	for _, it := range items {
		g.chans[it] = make(chan struct{})
	}
	return g
}

// wait blocks while item is held (or until ctx is done).
func (g *gate) wait(ctx context.Context, item string) {
	g.mu.Lock()
	ch := g.chans[item]
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (g *gate) release(item string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.chans[item])
	delete(g.chans, item)
}

// gated wraps the env's recording handlers with g.
func (e *env) gated(cfg *sharding.Config[string, string], g *gate) {
	cfg.HandleHigh = func(ctx context.Context, n string) error { e.record("H:" + n); g.wait(ctx, n); return nil }
	cfg.HandleLow = func(ctx context.Context, p string) error { e.record("L:" + p); g.wait(ctx, p); return nil }
}

// verboseEnvLogger makes e's logger record V(2) messages too.
func verboseEnvLogger(e *env) *logr.Logger {
	l := funcr.New(func(prefix, args string) {
		e.mu.Lock()
		e.logs = append(e.logs, prefix+" "+args)
		e.mu.Unlock()
	}, funcr.Options{Verbosity: 2})
	return &l
}

// Rule: an item goes to shard fnv1a32(key) % Shards; items of one shard are
// handled one at a time. Checked against hash/fnv by blocking each shard's
// worker with one item and seeing which items queue behind it.
func TestRoutingFollowsFNV1a(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 5
		e := newEnv()
		cfg := e.config()
		cfg.Shards = shards
		g := newGate()
		for s := range shards {
			g.chans[keyOnShard("blocker", s, shards, 0)] = make(chan struct{})
		}
		e.gated(&cfg, g)
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		for s := range shards {
			d.AddHigh(keyOnShard("blocker", s, shards, 0))
		}
		synctest.Wait()
		// Every worker is busy: each added key sits queued on its shard.
		for s := range shards {
			key := keyOnShard("k", s, shards, 0)
			require.Equal(t, s, sharding.ShardFor(key, shards), "ShardFor(%q)", key)
			d.AddLow(key)
			synctest.Wait()
			assert.NotContains(t, e.recorded(), "L:"+key)
			g.release(keyOnShard("blocker", s, shards, 0))
			synctest.Wait()
			assert.Contains(t, e.recorded(), "L:"+key, "released shard %d should run %s", s, key)
		}
	})
}

// Rules: strict priority per shard (nodes before pods) and FIFO within a lane.
func TestStrictPriorityAndFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		g := newGate("n0/p0")
		e.gated(&cfg, g)
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddLow("n0/p0") // blocks the only worker
		synctest.Wait()
		d.AddLow("n1/p1")
		d.AddHigh("n1")
		d.AddLow("n2/p2")
		d.AddHigh("n2")
		d.AddLow("n3/p3")
		d.AddHigh("n3")
		synctest.Wait()
		assert.Equal(t, 6, d.Len())
		assert.Equal(t, 3, e.metrics.get(e.metrics.depth, sharding.LaneHigh))
		assert.Equal(t, 3, e.metrics.get(e.metrics.depth, sharding.LaneLow))

		g.release("n0/p0")
		synctest.Wait()
		assert.Equal(t, []string{"L:n0/p0", "H:n1", "H:n2", "H:n3", "L:n1/p1", "L:n2/p2", "L:n3/p3"}, e.recorded())
		assert.Equal(t, 0, d.Len())
		assert.Equal(t, 0, e.metrics.get(e.metrics.depth, sharding.LaneHigh))
		assert.Equal(t, 0, e.metrics.get(e.metrics.depth, sharding.LaneLow))
	})
}

// Rule: a high item queued while low items are being worked through goes
// before the remaining low items.
func TestHighAddedMidwayOvertakesQueuedLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		g := newGate("a/1", "a/2")
		e.gated(&cfg, g)
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		for _, p := range []string{"a/1", "a/2", "a/3"} {
			d.AddLow(p)
		}
		synctest.Wait()
		g.release("a/1")
		synctest.Wait() // a/2 running, a/3 queued
		d.AddHigh("a")
		g.release("a/2")
		synctest.Wait()
		assert.Equal(t, []string{"L:a/1", "L:a/2", "H:a", "L:a/3"}, e.recorded())
	})
}

// Rule: the opt-in bound lets one low item through after N consecutive high
// items while low items wait.
func TestMaxHighBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.MaxHighBurst = 2
		g := newGate("block")
		e.gated(&cfg, g)
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddHigh("block")
		synctest.Wait()
		for _, n := range []string{"h1", "h2", "h3", "h4", "h5"} {
			d.AddHigh(n)
		}
		d.AddLow("l1")
		d.AddLow("l2")
		g.release("block")
		synctest.Wait()
		assert.Equal(t, []string{"H:block", "H:h1", "H:h2", "L:l1", "H:h3", "H:h4", "L:l2", "H:h5"}, e.recorded())

		// With no low item waiting, high items do not count towards the
		// burst: a low item added after them is not let through early.
		e.events = nil
		g = newGate("block2")
		e.gated(&cfg, g) // cfg handlers are captured by d: re-gate through a new dispatcher
		d2, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d2)
		d2.AddHigh("block2")
		synctest.Wait()
		d2.AddHigh("h1")
		d2.AddHigh("h2")
		g.release("block2")
		synctest.Wait()
		d2.AddHigh("h3")
		d2.AddLow("l1")
		synctest.Wait()
		assert.Equal(t, []string{"H:block2", "H:h1", "H:h2", "H:h3", "L:l1"}, e.recorded())
	})
}

// Rule: items of one shard key are never handled concurrently, and an item
// never concurrently with itself, even when re-added while running.
func TestSameShardKeyNeverConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Shards = 4
		var running sync.Map // key → *atomic.Int32
		var overlap atomic.Int32
		release := make(chan struct{})
		body := func(ctx context.Context, item string) error {
			v, _ := running.LoadOrStore(keyOf(item), new(atomic.Int32))
			c := v.(*atomic.Int32)
			if c.Add(1) > 1 {
				overlap.Add(1)
			}
			e.record(item)
			select {
			case <-release:
			case <-ctx.Done():
			}
			c.Add(-1)
			return nil
		}
		cfg.HandleHigh, cfg.HandleLow = body, body
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddHigh("n")
		synctest.Wait() // n is running
		for i := range 3 {
			d.AddHigh("n")
			d.AddLow(fmt.Sprintf("n/p%d", i))
			d.AddLow("n/p0")
		}
		synctest.Wait()
		assert.Len(t, e.recorded(), 1, "only one item of key n may run")
		close(release)
		synctest.Wait()
		assert.Zero(t, overlap.Load())
		// n was re-added while running: it runs once more, first (high);
		// n/p0's re-adds found it queued and were deduplicated.
		assert.Equal(t, []string{"n", "n", "n/p0", "n/p1", "n/p2"}, e.recorded())
	})
}

// Rule: an item added while queued is handled once.
func TestDedupQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		g := newGate("block")
		e.gated(&cfg, g)
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddHigh("block")
		synctest.Wait()
		for range 3 {
			d.AddLow("x/p")
			d.AddHigh("x")
		}
		assert.Equal(t, 2, d.Len())
		g.release("block")
		synctest.Wait()
		assert.Equal(t, []string{"H:block", "H:x", "L:x/p"}, e.recorded())
	})
}

// Rule: an item added while being handled runs exactly once more afterwards,
// never concurrently with itself, whether the first handling succeeds or
// fails (a failure's retry is superseded).
func TestReAddDuringHandling(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv()
				cfg := e.config()
				g := newGate("x/p")
				var calls, running atomic.Int32
				cfg.HandleLow = func(ctx context.Context, p string) error {
					require.Equal(t, int32(1), running.Add(1), "ran concurrently with itself")
					defer running.Add(-1)
					e.record("L:" + p)
					if calls.Add(1) == 1 {
						g.wait(ctx, p)
						if fail {
							return errors.New("boom")
						}
					}
					return nil
				}
				d, err := sharding.New(cfg)
				require.NoError(t, err)
				run(t, d)

				d.AddLow("x/p")
				synctest.Wait()
				d.AddLow("x/p")
				d.AddLow("x/p")
				assert.Equal(t, 0, d.Len(), "a marked item is not queued")
				g.release("x/p")
				synctest.Wait() // no clock step: the re-add runs at once
				assert.Equal(t, []string{"L:x/p", "L:x/p"}, e.recorded())
				e.clk.Step(time.Hour)
				synctest.Wait()
				assert.Equal(t, []string{"L:x/p", "L:x/p"}, e.recorded(), "superseded retry must not run")
				assert.Zero(t, e.metrics.get(e.metrics.retries, sharding.LaneLow))
			})
		})
	}
}

// Rule: an add while the item waits for a retry cancels the retry and queues
// it now, attempts reset.
func TestReAddDuringRetryWaitCancelsRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: 2, InitialBackoff: 10 * time.Second}
		var calls atomic.Int32
		cfg.HandleHigh = func(_ context.Context, n string) error {
			e.record("H:" + n)
			if c := calls.Add(1); c == 1 || c == 2 {
				return fmt.Errorf("failure %d", c)
			}
			return nil
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddHigh("x")
		synctest.Wait()
		assert.Equal(t, 0, d.Len(), "waiting for a retry is not queued")
		assert.Equal(t, 1, e.metrics.get(e.metrics.retries, sharding.LaneHigh))
		e.clk.Step(5 * time.Second)
		d.AddHigh("x") // cancels the retry due at +10s; runs now and fails again
		synctest.Wait()
		assert.Equal(t, []string{"H:x", "H:x"}, e.recorded())
		// Attempts were reset by the add: with MaxAttempts 2 the second
		// failure is retried, not dropped.
		assert.Empty(t, e.dropped())
		assert.Equal(t, 2, e.metrics.get(e.metrics.retries, sharding.LaneHigh))

		e.clk.Step(5 * time.Second) // +10s: the cancelled retry would have fired here
		synctest.Wait()
		assert.Equal(t, []string{"H:x", "H:x"}, e.recorded(), "cancelled retry ran")
		e.clk.Step(5 * time.Second) // +15s: 10s after the second failure
		synctest.Wait()
		assert.Equal(t, []string{"H:x", "H:x", "H:x"}, e.recorded())
	})
}

// Rules: retry with exponential backoff on the injected clock (never before
// InitialBackoff, doubling, capped at MaxBackoff), then drop after the limit,
// reported through the logger, the drops metric and OnDrop.
func TestRetryBackoffThenDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Second, MaxBackoff: 3 * time.Second}
		errBoom := errors.New("boom")
		var at []time.Duration
		cfg.HandleLow = func(context.Context, string) error {
			e.mu.Lock()
			at = append(at, e.clk.Since(t0))
			e.mu.Unlock()
			return errBoom
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		attempts := func() []time.Duration {
			e.mu.Lock()
			defer e.mu.Unlock()
			return append([]time.Duration(nil), at...)
		}
		d.AddLow("x/p")
		synctest.Wait()
		want := []time.Duration{0}
		require.Equal(t, want, attempts())
		// Backoffs: 1s, 2s, then 4s capped at 3s.
		for _, wait := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			e.clk.Step(wait - time.Nanosecond)
			synctest.Wait()
			require.Equal(t, want, attempts(), "retried before its backoff of %v", wait)
			e.clk.Step(time.Nanosecond)
			synctest.Wait()
			want = append(want, want[len(want)-1]+wait)
			require.Equal(t, want, attempts())
		}
		assert.Equal(t, []time.Duration{0, time.Second, 3 * time.Second, 6 * time.Second}, attempts())

		drops := e.dropped()
		require.Len(t, drops, 1)
		assert.Equal(t, sharding.LaneLow, drops[0].Lane)
		assert.Equal(t, "x/p", drops[0].Low)
		assert.Equal(t, 4, drops[0].Attempts)
		assert.ErrorIs(t, drops[0].Err, errBoom)
		assert.Equal(t, 3, e.metrics.get(e.metrics.retries, sharding.LaneLow))
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Contains(t, e.logged(), "Dropping item")

		e.clk.Step(time.Hour)
		synctest.Wait()
		assert.Len(t, attempts(), 4, "no attempt after the drop")
	})
}

// Rules: with UnlimitedAttempts a failing item is retried, every MaxBackoff
// once capped, until its handler succeeds: never dropped, and an add while it
// waits queues it at once.
func TestUnlimitedAttemptsRetryUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: sharding.UnlimitedAttempts, InitialBackoff: time.Second, MaxBackoff: 2 * time.Second}
		failures := 30 // far beyond DefaultMaxAttempts
		calls := 0
		cfg.HandleLow = func(context.Context, string) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			if calls++; calls <= failures {
				return errors.New("refused")
			}
			return nil
		}
		count := func() int {
			e.mu.Lock()
			defer e.mu.Unlock()
			return calls
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddLow("x/p")
		synctest.Wait()
		require.Equal(t, 1, count())
		e.clk.Step(time.Second) // 1s, then 2s each
		synctest.Wait()
		require.Equal(t, 2, count())
		for want := 3; want <= 20; want++ {
			e.clk.Step(2*time.Second - time.Nanosecond)
			synctest.Wait()
			require.Equal(t, want-1, count(), "retried before MaxBackoff")
			e.clk.Step(time.Nanosecond)
			synctest.Wait()
			require.Equal(t, want, count())
		}
		d.AddLow("x/p") // queued at once, attempts reset
		synctest.Wait()
		require.Equal(t, 21, count())
		for range 20 {
			e.clk.Step(2 * time.Second)
			synctest.Wait()
		}
		assert.Equal(t, failures+1, count(), "retried until it succeeded, then never again")
		assert.Empty(t, e.dropped(), "nothing dropped")
		assert.Equal(t, 0, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Equal(t, 0, d.Len())
	})
}

// Rules: a retried item is queued at the back of its lane, and items waiting
// for a retry do not hold back the other items of their shard.
func TestRetryQueuesAtBackAndHoldsNothingBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{InitialBackoff: time.Second}
		g := newGate("block")
		var failed atomic.Bool
		cfg.HandleLow = func(_ context.Context, p string) error {
			e.record("L:" + p)
			if p == "x/p" && !failed.Swap(true) {
				return errors.New("first try fails")
			}
			return nil
		}
		cfg.HandleHigh = func(ctx context.Context, n string) error { e.record("H:" + n); g.wait(ctx, n); return nil }
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddLow("x/p")
		synctest.Wait()
		d.AddHigh("a")
		d.AddLow("a/p")
		synctest.Wait()
		assert.Equal(t, []string{"L:x/p", "H:a", "L:a/p"}, e.recorded(), "waiting retry held items back")

		d.AddHigh("block")
		synctest.Wait()
		d.AddLow("b/p")
		d.AddLow("c/p")
		e.clk.Step(time.Second) // x/p is due: queued behind b/p and c/p
		synctest.Wait()
		assert.Equal(t, 3, d.Len())
		g.release("block")
		synctest.Wait()
		assert.Equal(t, []string{"L:x/p", "H:a", "L:a/p", "H:block", "L:b/p", "L:c/p", "L:x/p"}, e.recorded())
	})
}

// Rule: a panic in a handler is recovered, logged with its stack, and counts
// as a failure; a panic in a key func drops the item.
func TestPanicRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{InitialBackoff: time.Second}
		var calls atomic.Int32
		cfg.HandleHigh = func(_ context.Context, n string) error {
			e.record("H:" + n)
			if calls.Add(1) == 1 {
				panic("handler exploded")
			}
			return nil
		}
		cfg.LowKey = func(p string) string {
			if p == "bad" {
				panic("key exploded")
			}
			return keyOf(p)
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)

		d.AddHigh("n")
		synctest.Wait()
		assert.Contains(t, e.logged(), "handler exploded")
		assert.Contains(t, e.logged(), "goroutine", "stack logged")
		assert.Equal(t, 1, e.metrics.get(e.metrics.retries, sharding.LaneHigh))
		e.clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"H:n", "H:n"}, e.recorded())

		d.AddLow("bad")
		assert.Contains(t, e.logged(), "key exploded")
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Empty(t, e.dropped(), "a refused add is not passed to OnDrop")

		// A panicking OnDrop is recovered too.
		cfg.OnDrop = func(sharding.Drop[string, string]) { panic("hook exploded") }
		d2, err := sharding.New(cfg)
		require.NoError(t, err)
		d2.AddLow("x/p")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.NotPanics(t, func() { d2.Run(ctx) }, "x/p dropped at shutdown")
		assert.Contains(t, e.logged(), "hook exploded")
	})
}

// A panic fails the attempt with a *PanicError: its value, its stack, and
// an Error of the same shape as timedqueue's.
func TestPanicErrorFormat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Retry = sharding.RetryPolicy{MaxAttempts: 1}
		cfg.HandleLow = func(context.Context, string) error { panic("boom") }
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)
		d.AddLow("p")
		synctest.Wait()
		drops := e.dropped()
		require.Len(t, drops, 1)
		var pe *sharding.PanicError
		require.ErrorAs(t, drops[0].Err, &pe)
		assert.Equal(t, "boom", pe.Value)
		assert.Equal(t, "sharding: panic: boom", pe.Error())
		assert.Contains(t, string(pe.Stack), "TestPanicErrorFormat")
	})
}

// Rules: one stuck shard does not stop the others, and Add never blocks:
// 100k items pile up behind a stuck handler while other shards proceed.
func TestStuckShardDoesNotStopOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 4
		e := newEnv()
		cfg := e.config()
		cfg.Shards = shards
		stuck := keyOnShard("stuck", 0, shards, 0)
		var handled atomic.Int32
		cfg.HandleLow = func(ctx context.Context, p string) error {
			if keyOf(p) == stuck {
				<-ctx.Done() // stuck until shutdown
				return ctx.Err()
			}
			handled.Add(1)
			return nil
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		stop := run(t, d)

		d.AddLow(stuck + "/first")
		synctest.Wait()
		const piled = 100_000
		for i := range piled {
			d.AddLow(fmt.Sprintf("%s/p%d", stuck, i)) // returns at once, or synctest reports a deadlock
		}
		others := 0
		for s := 1; s < shards; s++ {
			for i := range 10 {
				for j := range 10 {
					d.AddLow(fmt.Sprintf("%s/p%d", keyOnShard("ok", s, shards, i), j))
					others++
				}
			}
		}
		synctest.Wait()
		assert.Equal(t, int32(others), handled.Load(), "other shards must finish")
		assert.Equal(t, piled, d.Len())

		stop()
		assert.Equal(t, piled+1, e.metrics.get(e.metrics.drops, sharding.LaneLow),
			"queued items and the stuck one (its ctx error is retried, then dropped at shutdown)")
		assert.Equal(t, 0, e.metrics.get(e.metrics.depth, sharding.LaneLow))
	})
}

// Rule: items added before Run are kept and handled once it starts.
func TestItemsAddedBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		d, err := sharding.New(e.config())
		require.NoError(t, err)
		d.AddLow("a/1")
		d.AddHigh("a")
		d.AddLow("a/2")
		synctest.Wait()
		assert.Equal(t, 3, d.Len())
		assert.Empty(t, e.recorded())
		run(t, d)
		synctest.Wait()
		assert.Equal(t, []string{"H:a", "L:a/1", "L:a/2"}, e.recorded())
	})
}

// Rules: on shutdown in-flight handlers see ctx cancelled and Run returns only
// after they returned; queued and retry-waiting items are dropped and counted.
func TestRunWaitsForHandlersThenDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		cfg.Shards = 2
		cfg.Retry = sharding.RetryPolicy{InitialBackoff: time.Minute}
		finish := make(chan struct{})
		var sawCancel atomic.Int32
		cfg.HandleHigh = func(ctx context.Context, n string) error {
			if n == "fails" {
				return errors.New("retry me")
			}
			<-ctx.Done()
			sawCancel.Add(1)
			<-finish // still busy after the cancellation
			return nil
		}
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		runReturned := make(chan struct{})
		go func() { d.Run(ctx); close(runReturned) }()
		busy := []string{keyOnShard("busy", 0, 2, 0), keyOnShard("busy", 1, 2, 0)}
		d.AddHigh("fails")
		synctest.Wait() // "fails" waits for its retry
		for _, n := range busy {
			d.AddHigh(n)
		}
		d.AddHigh(busy[0] + "/queued") // behind busy[0] on its shard
		d.AddLow(busy[0] + "/queued")
		synctest.Wait()
		cancel()
		synctest.Wait()
		assert.Equal(t, int32(2), sawCancel.Load(), "both in-flight handlers saw ctx cancelled")
		select {
		case <-runReturned:
			t.Fatal("Run returned while handlers were still running")
		default:
		}
		close(finish)
		<-runReturned

		drops := e.dropped()
		for _, dr := range drops {
			assert.ErrorIs(t, dr.Err, sharding.ErrStopped)
		}
		assert.Len(t, drops, 3, "queued high, queued low, retry-waiting high")
		assert.Equal(t, 2, e.metrics.get(e.metrics.drops, sharding.LaneHigh))
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Equal(t, 0, d.Len())
	})
}

// Rule: adds after Run returned are dropped and counted, never block, never
// panic; a second Run returns at once and logs.
func TestAfterRunAndSecondRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		d, err := sharding.New(e.config())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		runReturned := make(chan struct{})
		go func() { d.Run(ctx); close(runReturned) }()
		synctest.Wait()

		d.Run(ctx) // returns at once: ctx is still live
		assert.Contains(t, e.logged(), "Run called more than once")

		cancel()
		<-runReturned
		d.AddHigh("late")
		d.AddLow("late/p")
		synctest.Wait()
		assert.Empty(t, e.recorded())
		assert.Equal(t, 0, d.Len())
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneHigh))
		assert.Equal(t, 1, e.metrics.get(e.metrics.drops, sharding.LaneLow))
		assert.Empty(t, e.dropped(), "a refused add is not passed to OnDrop")
	})
}

// Rule: handlers and hooks may call AddHigh/AddLow (a node handler queueing
// its pods); metrics report attempt durations on the injected clock.
func TestHandlersMayAddAndDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv()
		cfg := e.config()
		var d *sharding.Dispatcher[string, string]
		cfg.HandleHigh = func(_ context.Context, n string) error {
			e.record("H:" + n)
			for i := range 2 {
				d.AddLow(fmt.Sprintf("%s/p%d", n, i))
			}
			e.clk.Step(2 * time.Second) // the handler "takes" 2s
			return nil
		}
		var err error
		d, err = sharding.New(cfg)
		require.NoError(t, err)
		run(t, d)
		d.AddHigh("n")
		synctest.Wait()
		assert.Equal(t, []string{"H:n", "L:n/p0", "L:n/p1"}, e.recorded())
		e.metrics.mu.Lock()
		defer e.metrics.mu.Unlock()
		assert.Equal(t, []float64{2}, e.metrics.duration[sharding.LaneHigh])
		assert.Equal(t, []float64{0, 0}, e.metrics.duration[sharding.LaneLow])
	})
}

func TestLaneString(t *testing.T) {
	assert.Equal(t, "high", sharding.LaneHigh.String())
	assert.Equal(t, "low", sharding.LaneLow.String())
	assert.Equal(t, "Lane(7)", sharding.Lane(7).String())
}
