package sharding

import (
	"context"
	"errors"
	"fmt"
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

// TestStress adds high and low items for a few thousand keys from many
// goroutines, with handlers that fail at random and a clock stepping
// concurrently, and checks the dispatcher's invariants:
//
//  1. an item is never handled concurrently with itself, nor with another
//     item of its shard;
//  2. priority: when a worker picks a low item, no high item of its shard is
//     queued (strict), or it has taken MaxHighBurst high items in a row while
//     low items waited (bounded); with the bound, it never takes more;
//  3. every item is handled successfully at least once after its last add
//     began;
//  4. nothing is dropped and nothing stays queued.
func TestStress(t *testing.T) {
	for _, burst := range []int{0, 3} {
		t.Run(fmt.Sprintf("MaxHighBurst=%d", burst), func(t *testing.T) {
			seed := uint64(20250101 + burst) // fixed: the schedule varies anyway; invariants must hold for any
			t.Logf("seed %d", seed)
			synctest.Test(t, func(t *testing.T) { stress(t, burst, seed) })
		})
	}
}

// itemStats tracks one item. adds counts adds begun; seen is the largest adds
// value a successful handling read when it started.
type itemStats struct {
	adds    atomic.Int64
	seen    atomic.Int64
	running atomic.Int32
}

func stress(t *testing.T, burst int, seed uint64) {
	const (
		shards      = 4
		nodes       = 2000
		podsPerNode = 2
		adders      = 8
		addsEach    = 4000
	)
	clk := testingclock.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))

	var stats sync.Map // item (lane-prefixed) → *itemStats
	statsOf := func(item string) *itemStats {
		v, _ := stats.LoadOrStore(item, new(itemStats))
		return v.(*itemStats)
	}
	var shardRunning [shards]atomic.Int32
	var violations atomic.Int64
	var fail = func(format string, args ...any) {
		if violations.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	var failures atomic.Int64

	handler := func(prefix string) func(context.Context, string) error {
		return func(_ context.Context, item string) error {
			st := statsOf(prefix + item)
			shard := fnv1a32(keyOfItem(item)) % shards
			if st.running.Add(1) != 1 {
				fail("%s%s handled concurrently with itself", prefix, item)
			}
			if shardRunning[shard].Add(1) != 1 {
				fail("shard %d handling two items at once (%s%s)", shard, prefix, item)
			}
			seen := st.adds.Load()
			h := fnv1a32(item) ^ uint32(seen) ^ uint32(failures.Load())
			if h%7 == 0 {
				runtime.Gosched()
			}
			var err error
			if h%10 == 0 {
				err = errors.New("random failure")
				failures.Add(1)
			} else {
				for {
					old := st.seen.Load()
					if seen <= old || st.seen.CompareAndSwap(old, seen) {
						break
					}
				}
			}
			shardRunning[shard].Add(-1)
			st.running.Add(-1)
			return err
		}
	}

	var drops atomic.Int64
	quiet := logr.Discard()
	d, err := New(Config[string, string]{
		Shards:       shards,
		HighKey:      keyOfItem,
		LowKey:       keyOfItem,
		HandleHigh:   handler("H:"),
		HandleLow:    handler("L:"),
		Clock:        clk,
		MaxHighBurst: burst,
		Retry:        RetryPolicy{MaxAttempts: 1000, InitialBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond},
		Logger:       &quiet,
		OnDrop:       func(Drop[string, string]) { drops.Add(1) },
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { d.Run(ctx); close(runDone) }()

	var wg sync.WaitGroup
	var addersDone atomic.Bool
	for a := range adders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(a)))
			for range addsEach {
				node := fmt.Sprintf("n%d", r.IntN(nodes))
				if r.IntN(4) == 0 {
					statsOf("H:" + node).adds.Add(1)
					d.AddHigh(node)
				} else {
					pod := fmt.Sprintf("%s/p%d", node, r.IntN(podsPerNode))
					statsOf("L:" + pod).adds.Add(1)
					d.AddLow(pod)
				}
				if r.IntN(50) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	stepperDone := make(chan struct{})
	go func() { // moves time while adds, handlers and retries race
		defer close(stepperDone)
		for !addersDone.Load() {
			clk.Step(time.Millisecond)
			runtime.Gosched()
		}
	}()
	wg.Wait()
	addersDone.Store(true)
	<-stepperDone

	settled := func() bool {
		ok := true
		stats.Range(func(k, v any) bool {
			st := v.(*itemStats)
			if st.seen.Load() < st.adds.Load() {
				ok = false
			}
			return ok
		})
		return ok
	}
	for i := 0; ; i++ {
		synctest.Wait()
		if settled() {
			break
		}
		require.Less(t, i, 2000, "items never handled after their last add")
		clk.Step(8 * time.Millisecond)
	}
	assert.Equal(t, 0, d.Len())
	cancel()
	<-runDone
	assert.Zero(t, drops.Load(), "nothing should be dropped")
	assert.Zero(t, violations.Load())
	t.Logf("failures %d", failures.Load())
}

func keyOfItem(item string) string {
	node, _, _ := strings.Cut(item, "/")
	return node
}
