package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/sharding"
)

// The baseline is built like the taint manager's original loop: a
// workqueue-style front queue per lane (mutex + cond, FIFO, dirty and
// processing sets) that deduplicates, one dispatcher goroutine per front
// queue moving items into per-shard buffered channels (capacity 10 for the
// high lane, 1 for the low lane, as the original's node and pod channels),
// and one worker per shard that prefers the high channel. The benchmarks add
// only low items, so exactly one dispatcher goroutine carries them. It uses
// generic maps rather than interface{} items, which makes it faster than the
// original, not slower.

type frontQueue[T comparable] struct {
	mu         sync.Mutex
	cond       sync.Cond
	queue      []T
	dirty      map[T]struct{}
	processing map[T]struct{}
	shutdown   bool
}

func newFrontQueue[T comparable]() *frontQueue[T] {
	q := &frontQueue[T]{dirty: map[T]struct{}{}, processing: map[T]struct{}{}}
	q.cond.L = &q.mu
	return q
}

func (q *frontQueue[T]) Add(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if _, ok := q.dirty[item]; ok {
		return
	}
	q.dirty[item] = struct{}{}
	if _, ok := q.processing[item]; ok {
		return
	}
	q.queue = append(q.queue, item)
	q.cond.Signal()
}

func (q *frontQueue[T]) Get() (item T, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queue) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if len(q.queue) == 0 {
		return item, true
	}
	item = q.queue[0]
	var zero T
	q.queue[0] = zero
	q.queue = q.queue[1:]
	q.processing[item] = struct{}{}
	delete(q.dirty, item)
	return item, false
}

func (q *frontQueue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, item)
	if _, ok := q.dirty[item]; ok {
		q.queue = append(q.queue, item)
		q.cond.Signal()
	}
}

func (q *frontQueue[T]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}

type baseline[H, L comparable] struct {
	cfg    sharding.Config[H, L]
	highQ  *frontQueue[H]
	lowQ   *frontQueue[L]
	highCh []chan H
	lowCh  []chan L
}

func newBaseline[H, L comparable](cfg sharding.Config[H, L]) *baseline[H, L] {
	b := &baseline[H, L]{cfg: cfg, highQ: newFrontQueue[H](), lowQ: newFrontQueue[L]()}
	for range cfg.Shards {
		b.highCh = append(b.highCh, make(chan H, 10))
		b.lowCh = append(b.lowCh, make(chan L, 1))
	}
	return b
}

func (b *baseline[H, L]) AddHigh(item H) { b.highQ.Add(item) }
func (b *baseline[H, L]) AddLow(item L)  { b.lowQ.Add(item) }

func baseShard(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

func dispatch[T comparable](q *frontQueue[T], chans []chan T, key func(T) string, stop <-chan struct{}) {
	for {
		item, shutdown := q.Get()
		if shutdown {
			return
		}
		select {
		case <-stop:
			q.Done(item)
			return
		case chans[baseShard(key(item), len(chans))] <- item:
		}
	}
}

func (b *baseline[H, L]) Run(ctx context.Context) {
	stop := ctx.Done()
	var wg sync.WaitGroup
	wg.Go(func() { dispatch(b.highQ, b.highCh, b.cfg.HighKey, stop) })
	wg.Go(func() { dispatch(b.lowQ, b.lowCh, b.cfg.LowKey, stop) })
	for i := range b.cfg.Shards {
		wg.Go(func() { b.worker(ctx, i) })
	}
	<-stop
	b.highQ.ShutDown()
	b.lowQ.ShutDown()
	wg.Wait()
}

func (b *baseline[H, L]) handleHigh(ctx context.Context, item H) {
	_ = b.cfg.HandleHigh(ctx, item)
	b.highQ.Done(item)
}

func (b *baseline[H, L]) worker(ctx context.Context, i int) {
	for {
		select {
		case <-ctx.Done():
			return
		case item := <-b.highCh[i]:
			b.handleHigh(ctx, item)
		case item := <-b.lowCh[i]:
			// Drain the high channel first.
		drain:
			for {
				select {
				case h := <-b.highCh[i]:
					b.handleHigh(ctx, h)
				default:
					break drain
				}
			}
			_ = b.cfg.HandleLow(ctx, item)
			b.lowQ.Done(item)
		}
	}
}

// quiet discards the dispatcher's logs.
var quiet = logr.Discard()

// runner is what both implementations offer the benchmarks.
type runner interface {
	AddLow(int)
	Run(context.Context)
}

var impls = []struct {
	name string
	make func(sharding.Config[int, int]) runner
}{
	{"baseline", func(cfg sharding.Config[int, int]) runner { return newBaseline(cfg) }},
	{"taintkit", func(cfg sharding.Config[int, int]) runner {
		d, err := sharding.New(cfg)
		if err != nil {
			panic(err)
		}
		return d
	}},
}

func keys(n int, keep func(string) bool) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("node-%d", i)
		if keep == nil || keep(k) {
			out = append(out, k)
		}
	}
	return out
}

// BenchmarkThroughput pushes items low items over keys shard keys through a
// no-op handler, one producer goroutine, the default 8 shards.
func BenchmarkThroughput(b *testing.B) {
	const items, nkeys = 1_000_000, 10_000
	ks := keys(nkeys, nil)
	for _, impl := range impls {
		b.Run(fmt.Sprintf("impl=%s/items=%d/keys=%d", impl.name, items, nkeys), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var handled atomic.Int64
				done := make(chan struct{})
				cfg := sharding.Config[int, int]{
					Shards:  sharding.DefaultShards,
					Logger:  &quiet,
					HighKey: func(i int) string { return ks[i%nkeys] },
					LowKey:  func(i int) string { return ks[i%nkeys] },
					HandleHigh: func(context.Context, int) error {
						return nil
					},
					HandleLow: func(context.Context, int) error {
						if handled.Add(1) == items {
							close(done)
						}
						return nil
					},
				}
				r := impl.make(cfg)
				ctx, cancel := context.WithCancel(context.Background())
				runDone := make(chan struct{})
				go func() { r.Run(ctx); close(runDone) }()
				for i := range items {
					r.AddLow(i)
				}
				<-done
				cancel()
				<-runDone
			}
			b.ReportMetric(float64(items)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// BenchmarkSlowShard measures the throughput of seven shards while the
// eighth shard's handler sleeps 10 ms per item (slow=true), against the same
// workload with every handler a no-op (slow=false). One item in every 1000
// goes to the slow shard. items/s counts the other shards' items, from the
// first add to the last of them handled.
func BenchmarkSlowShard(b *testing.B) {
	const (
		shards = sharding.DefaultShards
		others = 100_000
		every  = 1000
		nkeys  = 10_000
	)
	slowKey := keys(1, func(k string) bool { return baseShard(k, shards) == 0 })[0]
	ks := keys(nkeys, func(k string) bool { return baseShard(k, shards) != 0 })
	// Item i > 0 is an ordinary item for ks[i%nkeys]; items ≤ 0 go to the slow shard.
	key := func(i int) string {
		if i <= 0 {
			return slowKey
		}
		return ks[i%nkeys]
	}
	for _, impl := range impls {
		for _, slow := range []bool{false, true} {
			b.Run(fmt.Sprintf("impl=%s/slow=%v", impl.name, slow), func(b *testing.B) {
				b.ReportAllocs()
				var busy time.Duration
				for b.Loop() {
					var handled atomic.Int64
					done := make(chan struct{})
					handle := func(ctx context.Context, i int) error {
						if i <= 0 {
							if slow {
								t := time.NewTimer(10 * time.Millisecond)
								defer t.Stop()
								select {
								case <-t.C:
								case <-ctx.Done():
								}
							}
							return nil
						}
						if handled.Add(1) == others {
							close(done)
						}
						return nil
					}
					r := impl.make(sharding.Config[int, int]{
						Shards: shards, Logger: &quiet, HighKey: key, LowKey: key, HandleHigh: handle, HandleLow: handle,
					})
					ctx, cancel := context.WithCancel(context.Background())
					runDone := make(chan struct{})
					go func() { r.Run(ctx); close(runDone) }()
					start := time.Now()
					for i := 1; i <= others; i++ {
						if i%every == 0 {
							r.AddLow(-i)
						}
						r.AddLow(i)
					}
					<-done
					busy += time.Since(start)
					cancel()
					<-runDone
				}
				b.ReportMetric(float64(others)*float64(b.N)/busy.Seconds(), "items/s")
			})
		}
	}
}

// retriesCounter counts retries and closes reached when they reach at.
type retriesCounter struct {
	n       *atomic.Int64
	at      int64
	reached chan struct{}
}

func (c retriesCounter) Inc() {
	if c.n.Add(1) == c.at {
		close(c.reached)
	}
}

func (c retriesCounter) NewDepthMetric(string, sharding.Lane) sharding.Gauge     { return nil }
func (c retriesCounter) NewRetriesMetric(string, sharding.Lane) sharding.Counter { return c }
func (c retriesCounter) NewDropsMetric(string, sharding.Lane) sharding.Counter   { return nil }
func (c retriesCounter) NewDurationMetric(string, sharding.Lane) sharding.Histogram {
	return nil
}

// BenchmarkLaneMemory queues a mass of low items on one shard, handles them
// all but the last few, which fail and wait for a retry an hour away on a
// fake clock, and reports the heap per item at the peak (all queued) and the
// heap still held once only the few are left: the lane's memory must follow
// its size down, not stay at the peak's. -short queues 100,000 items instead
// of 1,000,000.
//
//	go test -run '^$' -bench LaneMemory -benchtime 3x ./sharding/
func BenchmarkLaneMemory(b *testing.B) {
	n, stuck := 1_000_000, 3
	if testing.Short() {
		n = 100_000
	}
	var peak, left uint64
	for b.Loop() {
		var retries atomic.Int64
		stuckFailed := make(chan struct{})
		d, err := sharding.New(sharding.Config[int, int]{
			Shards:     1, // one lane holds them all, in order: the stuck items, added last, are handled last
			Logger:     &quiet,
			Clock:      testingclock.NewFakeClock(time.Unix(0, 0)),
			Retry:      sharding.RetryPolicy{InitialBackoff: time.Hour},
			Metrics:    retriesCounter{&retries, int64(stuck), stuckFailed},
			HighKey:    func(int) string { return "" },
			LowKey:     func(int) string { return "" },
			HandleHigh: func(context.Context, int) error { return nil },
			HandleLow: func(_ context.Context, i int) error {
				if i >= n-stuck {
					return errors.New("stuck")
				}
				return nil
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		base := heapAfterGC()
		for i := range n {
			d.AddLow(i)
		}
		peak = heapAfterGC() - base
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		// The worker settles items in order, so once the stuck ones have
		// failed every other item is settled.
		<-stuckFailed
		left = heapAfterGC() - base
		cancel()
		<-done
	}
	b.ReportMetric(float64(peak)/float64(n), "peak-B/item")
	b.ReportMetric(float64(left)/(1<<10), "left-KiB")
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
