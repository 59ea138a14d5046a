package sharding

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// TestInvariantsUnderRandomFaults drives a dispatcher with handlers that,
// at random, return errors, panic, call runtime.Goexit, wait on the fake
// clock, and add items (their own and others, in both lanes), and with an
// OnDrop hook that re-adds what it is given (always, for drops at shutdown).
// It checks what the contract promises:
//
//  1. nothing is lost: after the adds stop and time moves on, every item was
//     handled successfully after its last add began, or reported through
//     OnDrop once its retries ran out; at shutdown, the rest is reported with
//     ErrStopped, and the hook's re-adds then are refused, counted and never
//     reported;
//  2. nothing is reported twice: per item, successful attempts, OnDrop
//     reports and refused adds never outnumber its adds, and an item is
//     reported with ErrStopped at most once;
//  3. no shard stops: after the faults, a new item on every shard is handled;
//  4. an item is never handled concurrently with itself or another item of
//     its shard, and a worker never takes a low item while a high item of
//     its shard is queued;
//  5. the metrics agree (depth back to zero, drops = OnDrop reports + refused
//     adds), and Run returns with no goroutine left (synctest fails the test
//     if one is).
func TestInvariantsUnderRandomFaults(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomFaults(t, seed) })
		})
	}
}

// faultedItem is what the test knows of one item (lane-prefixed: "H:n3",
// "L:n3/p1").
type faultedItem struct {
	adds      atomic.Int64 // adds begun
	served    atomic.Int64 // the largest adds value an ending covered
	lastStart atomic.Int64 // adds, as read by the item's latest attempt
	calls     atomic.Int64 // attempts started
	succeeded atomic.Int64 // successful attempts
	reported  atomic.Int64 // OnDrop reports
	stopped   atomic.Int64 // OnDrop reports with ErrStopped
	refused   atomic.Int64 // adds refused after the dispatcher stopped
	running   atomic.Int32
}

func (it *faultedItem) serve(upTo int64) {
	for {
		old := it.served.Load()
		if upTo <= old || it.served.CompareAndSwap(old, upTo) {
			return
		}
	}
}

// faultCounts counts what the handlers and the hook did, to check that the
// faults exercised every path.
type faultCounts struct {
	errors, panics, goexits, sleeps, readds, hookReadds, exhausted, stopped atomic.Int64
}

func randomFaults(t *testing.T, seed uint64) {
	const (
		shards      = 4
		nodes       = 150
		podsPerNode = 3
		adders      = 4
		addsEach    = 1000
		maxAttempts = 3
	)
	clk := testingclock.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	var (
		items      sync.Map // lane-prefixed item → *faultedItem
		counts     faultCounts
		violations atomic.Int64
		shardBusy  [shards]atomic.Int32
		inflight   atomic.Int32
		d          *Dispatcher[string, string]
	)
	itemOf := func(name string) *faultedItem {
		v, _ := items.LoadOrStore(name, new(faultedItem))
		return v.(*faultedItem)
	}
	fail := func(format string, args ...any) {
		if violations.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	// add adds the item named "H:…" or "L:…", counting the add first.
	add := func(name string) {
		itemOf(name).adds.Add(1)
		if name[0] == 'H' {
			d.AddHigh(name[2:])
		} else {
			d.AddLow(name[2:])
		}
	}
	randomItem := func(r *rand.Rand) string {
		node := fmt.Sprintf("n%d", r.IntN(nodes))
		if r.IntN(3) == 0 {
			return "H:" + node
		}
		return fmt.Sprintf("L:%s/p%d", node, r.IntN(podsPerNode))
	}
	// rng returns the random source of one attempt: a function of the seed,
	// the item and the attempt's number, not of the goroutine schedule.
	rng := func(name string, call int64) *rand.Rand {
		h := fnv.New64a()
		h.Write([]byte(name))
		return rand.New(rand.NewPCG(seed^h.Sum64(), uint64(call)))
	}

	handler := func(prefix string) func(context.Context, string) error {
		return func(ctx context.Context, item string) error {
			name := prefix + item
			it := itemOf(name)
			shard := ShardFor(keyOfItem(item), shards)
			start := it.adds.Load()
			it.lastStart.Store(start)
			r := rng(name, it.calls.Add(1))
			inflight.Add(1)
			if it.running.Add(1) != 1 {
				fail("%s handled concurrently with itself", name)
			}
			if shardBusy[shard].Add(1) != 1 {
				fail("shard %d handling two items at once (%s)", shard, name)
			}
			// Deferred, so that a panic or a Goexit settles the books too.
			defer func() {
				shardBusy[shard].Add(-1)
				it.running.Add(-1)
				inflight.Add(-1)
			}()
			if probe(item) {
				it.succeeded.Add(1)
				it.serve(start)
				return nil
			}

			if r.IntN(100) < 15 {
				counts.sleeps.Add(1)
				select {
				case <-clk.After(time.Duration(1+r.IntN(5)) * time.Millisecond):
				case <-ctx.Done():
				}
			}
			if r.IntN(100) < 20 {
				for range 1 + r.IntN(2) {
					counts.readds.Add(1)
					if r.IntN(3) == 0 {
						add(name)
					} else {
						add(randomItem(r))
					}
				}
			}
			switch n := r.IntN(100); {
			case n < 15:
				counts.errors.Add(1)
				return errors.New("injected error")
			case n < 25:
				counts.panics.Add(1)
				panic("injected panic")
			case n < 35:
				counts.goexits.Add(1)
				runtime.Goexit()
			}
			it.succeeded.Add(1)
			it.serve(start)
			return nil
		}
	}

	var reports, refused atomic.Int64
	onDrop := func(drop Drop[string, string]) {
		reports.Add(1)
		name := "H:" + drop.High
		if drop.Lane == LaneLow {
			name = "L:" + drop.Low
		}
		it := itemOf(name)
		it.reported.Add(1)
		if errors.Is(drop.Err, ErrStopped) {
			counts.stopped.Add(1)
			if it.stopped.Add(1) > 1 {
				fail("%s reported with ErrStopped twice", name)
			}
			if drop.Attempts >= maxAttempts {
				fail("%s dropped at shutdown after %d attempts", name, drop.Attempts)
			}
			it.serve(it.adds.Load())
			// Every shard is closed before the first report at shutdown:
			// this re-add is refused, and must not come back here.
			refused.Add(1)
			it.refused.Add(1)
			add(name)
			it.serve(it.adds.Load())
			return
		}
		counts.exhausted.Add(1)
		if drop.Attempts != maxAttempts {
			fail("%s dropped after %d attempts, want %d: %v", name, drop.Attempts, maxAttempts, drop.Err)
		}
		// The worker reports before it takes another item: lastStart is
		// the last attempt's.
		it.serve(it.lastStart.Load())
		if rng(name, -it.reported.Load()).IntN(2) == 0 {
			counts.hookReadds.Add(1)
			add(name)
		}
	}

	metrics := new(fakeLaneMetrics)
	quiet := logr.Discard()
	var err error
	d, err = New(Config[string, string]{
		Shards:     shards,
		HighKey:    keyOfItem,
		LowKey:     keyOfItem,
		HandleHigh: handler("H:"),
		HandleLow:  handler("L:"),
		Clock:      clk,
		Retry:      RetryPolicy{MaxAttempts: maxAttempts, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond},
		Logger:     &quiet,
		Metrics:    metrics,
		OnDrop:     onDrop,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { d.Run(ctx); close(runDone) }()

	// Phase 1: adders race with the faults; then time moves until every
	// item is handled or reported and nothing runs.
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(a)))
			for range addsEach {
				add(randomItem(r))
			}
		})
	}
	wg.Wait()
	allServed := func() (string, bool) {
		var missing string
		items.Range(func(k, v any) bool {
			it := v.(*faultedItem)
			if it.served.Load() < it.adds.Load() {
				missing = k.(string)
				return false
			}
			return true
		})
		return missing, missing == ""
	}
	for i := 0; ; i++ {
		synctest.Wait()
		if _, ok := allServed(); ok && inflight.Load() == 0 && d.Len() == 0 {
			break
		}
		if i == 10_000 {
			missing, _ := allServed()
			require.FailNow(t, "items neither handled nor reported", "for example %s; Len %d", missing, d.Len())
		}
		clk.Step(time.Millisecond)
	}

	// Phase 2: every shard still handles items.
	probes := make([]string, shards)
	for s := range shards {
		node := ""
		for k := 0; node == "" || ShardFor(node, shards) != s; k++ {
			node = fmt.Sprintf("probe%d-%d", s, k)
		}
		probes[s] = node
		add("H:" + node)
		add("L:" + node + "/p")
	}
	synctest.Wait()
	for s, node := range probes {
		assert.Equal(t, int64(1), itemOf("H:"+node).succeeded.Load(), "shard %d stopped", s)
		assert.Equal(t, int64(1), itemOf("L:"+node+"/p").succeeded.Load(), "shard %d stopped", s)
	}

	// Phase 3: shut down in the middle of more faults.
	for a := range adders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(adders+a)))
			for range addsEach / 4 {
				add(randomItem(r))
			}
		})
	}
	wg.Wait()
	for range 3 { // some handled, some retried, some still queued or sleeping
		clk.Step(time.Millisecond)
		synctest.Wait()
	}
	cancel()
	<-runDone

	if missing, ok := allServed(); !ok {
		t.Errorf("%s neither handled nor reported", missing)
	}
	items.Range(func(k, v any) bool {
		it := v.(*faultedItem)
		if ends := it.succeeded.Load() + it.reported.Load() + it.refused.Load(); ends > it.adds.Load() {
			fail("%s: %d successes, %d reports and %d refused adds for %d adds",
				k, it.succeeded.Load(), it.reported.Load(), it.refused.Load(), it.adds.Load())
		}
		return true
	})
	assert.Equal(t, 0, d.Len())
	assert.Equal(t, 0, metrics.get(&metrics.depth, LaneHigh)+metrics.get(&metrics.depth, LaneLow), "depth")
	assert.Equal(t, int(reports.Load()+refused.Load()),
		metrics.get(&metrics.drops, LaneHigh)+metrics.get(&metrics.drops, LaneLow), "drops metric")
	assert.Zero(t, violations.Load())
	for what, n := range map[string]*atomic.Int64{
		"errors": &counts.errors, "panics": &counts.panics, "Goexits": &counts.goexits,
		"sleeps": &counts.sleeps, "handler re-adds": &counts.readds, "hook re-adds": &counts.hookReadds,
		"drops after the last attempt": &counts.exhausted, "drops at shutdown": &counts.stopped,
	} {
		assert.NotZero(t, n.Load(), "the faults made no %s", what)
	}
	t.Logf("errors %d, panics %d, Goexits %d, sleeps %d, handler re-adds %d, hook re-adds %d, dropped after the last attempt %d, at shutdown %d",
		counts.errors.Load(), counts.panics.Load(), counts.goexits.Load(), counts.sleeps.Load(),
		counts.readds.Load(), counts.hookReadds.Load(), counts.exhausted.Load(), counts.stopped.Load())
}

// probe reports whether item is one of phase 2's, which always succeed.
func probe(item string) bool { return strings.HasPrefix(item, "probe") }

// fakeLaneMetrics counts depth and drops per lane.
type fakeLaneMetrics struct {
	mu           sync.Mutex
	depth, drops [2]int
}

type laneCounter struct {
	m *fakeLaneMetrics
	v *int
}

func (c laneCounter) Inc() { c.m.mu.Lock(); *c.v++; c.m.mu.Unlock() }
func (c laneCounter) Dec() { c.m.mu.Lock(); *c.v--; c.m.mu.Unlock() }

func (m *fakeLaneMetrics) NewDepthMetric(_ string, l Lane) Gauge    { return laneCounter{m, &m.depth[l]} }
func (m *fakeLaneMetrics) NewDurationMetric(string, Lane) Histogram { return nil }
func (m *fakeLaneMetrics) NewRetriesMetric(string, Lane) Counter    { return nil }
func (m *fakeLaneMetrics) NewDropsMetric(_ string, l Lane) Counter {
	return laneCounter{m, &m.drops[l]}
}
func (m *fakeLaneMetrics) get(which *[2]int, l Lane) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return which[l]
}
