package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/timedqueue"
)

// Benchmarks run on the real clock with FireAt at least a day ahead, so nothing
// fires mid-run (a FakeClock would measure the fake). Each compares
// impl=taintkit with impl=baseline, a queue built like the original
// TimedWorkerQueue: a map of pointers to workers, one real-clock AfterFunc per
// item, and a goroutine per firing.
//
//	go test -run '^$' -bench . -benchmem -count 10 ./timedqueue/ | tee bench.txt
//	benchstat -col /impl bench.txt

// baseline is built like the original TimedWorkerQueue.
type baseline struct {
	mu       sync.Mutex
	workers  map[string]*baselineWorker
	work     timedqueue.WorkFunc[string]
	clock    clock.WithDelayedExecution
	released func() // if not nil, called once a fired key is deleted
}

type baselineArgs struct{ key string }

type baselineWorker struct {
	args      *baselineArgs
	createdAt time.Time
	fireAt    time.Time
	timer     clock.Timer
}

func newBaseline(work timedqueue.WorkFunc[string]) *baseline {
	return &baseline{workers: map[string]*baselineWorker{}, work: work, clock: clock.RealClock{}}
}

func (q *baseline) newWorker(key string, createdAt, fireAt time.Time) *baselineWorker {
	w := &baselineWorker{args: &baselineArgs{key: key}, createdAt: createdAt, fireAt: fireAt}
	fire := func() {
		_ = q.work(context.Background(), w.args.key)
		q.mu.Lock()
		if q.workers[key] == w {
			delete(q.workers, key)
		}
		q.mu.Unlock()
		if q.released != nil {
			q.released()
		}
	}
	if delay := fireAt.Sub(q.clock.Now()); delay > 0 {
		w.timer = q.clock.AfterFunc(delay, fire) // the runtime runs fire on a new goroutine
	} else {
		go fire()
	}
	return w
}

func (q *baseline) AddWork(key string, createdAt, fireAt time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.workers[key]; ok {
		return false
	}
	q.workers[key] = q.newWorker(key, createdAt, fireAt)
	return true
}

func (q *baseline) UpdateWork(key string, createdAt, fireAt time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, ok := q.workers[key]; ok {
		if w.fireAt.Equal(fireAt) {
			return false
		}
		if w.timer != nil {
			w.timer.Stop()
		}
	}
	q.workers[key] = q.newWorker(key, createdAt, fireAt)
	return true
}

func (q *baseline) CancelWork(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.workers[key]
	if !ok {
		return false
	}
	delete(q.workers, key)
	return w.timer != nil && w.timer.Stop()
}

func (q *baseline) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, w := range q.workers {
		if w.timer != nil {
			w.timer.Stop()
		}
		delete(q.workers, k)
	}
}

// benchQueue is what the benchmarks need of either implementation.
type benchQueue interface {
	AddWork(key string, createdAt, fireAt time.Time) bool
	UpdateWork(key string, createdAt, fireAt time.Time) bool
	CancelWork(key string) bool
	Close()
}

type ours struct {
	*timedqueue.TimedWorkerQueue[string]
}

func (q ours) Close() { _ = q.Shutdown(context.Background()) }

func newOurs(work timedqueue.WorkFunc[string], opts ...timedqueue.Option) ours {
	q, err := timedqueue.New(work, append([]timedqueue.Option{timedqueue.WithLogger(logr.Discard())}, opts...)...)
	if err != nil {
		panic(err)
	}
	return ours{q}
}

var impls = []struct {
	name string
	make func(timedqueue.WorkFunc[string]) benchQueue
}{
	{"taintkit", func(w timedqueue.WorkFunc[string]) benchQueue { return newOurs(w) }},
	{"baseline", func(w timedqueue.WorkFunc[string]) benchQueue { return newBaseline(w) }},
}

func noWork(context.Context, string) error { return nil }

var (
	keysOnce sync.Once
	keys     []string
)

// benchKeys returns n pod-like keys, built once and shared, so that their
// memory is not counted per item.
func benchKeys(n int) []string {
	keysOnce.Do(func() {
		keys = make([]string, 2_000_000)
		for i := range keys {
			keys[i] = fmt.Sprintf("namespace-%d/pod-%d", i%1000, i)
		}
	})
	return keys[:n]
}

// farTime returns the i-th FireAt: a day ahead, spread over an hour.
func farTime(base time.Time, i int) time.Time {
	return base.Add(24*time.Hour + time.Duration(uint64(i)*2654435761%3600_000)*time.Millisecond)
}

var sizes = []int{100_000, 1_000_000}

func skipLarge(b *testing.B, n int) {
	if n >= 1_000_000 && testing.Short() {
		b.Skip("1M items: skipped with -short")
	}
}

func fill(q benchQueue, ks []string, now time.Time) {
	for i, k := range ks {
		q.AddWork(k, now, farTime(now, i))
	}
}

// BenchmarkMemory reports the heap bytes per pending item (B/item) at 1M items.
func BenchmarkMemory(b *testing.B) {
	const n = 1_000_000
	for _, impl := range impls {
		b.Run(fmt.Sprintf("impl=%s/pending=%d", impl.name, n), func(b *testing.B) {
			skipLarge(b, n)
			ks := benchKeys(n)
			now := time.Now()
			var perItem float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				q := impl.make(noWork)
				fill(q, ks, now)
				runtime.GC()
				runtime.ReadMemStats(&after)
				perItem = float64(after.HeapAlloc-before.HeapAlloc) / n
				b.StopTimer()
				q.Close()
				runtime.KeepAlive(q)
				b.StartTimer()
			}
			b.ReportMetric(perItem, "B/item")
		})
	}
}

// BenchmarkMemoryAfter reports the heap a queue still holds per item
// (held-B/item) after n pending items went away: all cancelled
// (after=cancel), or all due at once and run (after=fire). The slab, its free
// list, the index and the heap shrink once four times larger than what they
// hold (see store.shrink); before they did, 106 B/item stayed held after
// either, at n = 1M. n is 100k with -short.
func BenchmarkMemoryAfter(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	ks := benchKeys(n)
	for _, after := range []string{"cancel", "fire"} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("after=%s/impl=%s/items=%d", after, impl.name, n), func(b *testing.B) {
				var held float64
				for b.Loop() {
					before := heapNow()
					q, released := releasingQueue(impl.name, n)
					now := time.Now()
					if after == "cancel" {
						fill(q, ks, now)
						for _, k := range ks {
							q.CancelWork(k)
						}
					} else {
						// All due at once, once every item is pending.
						at := now.Add(time.Duration(n) * 3 * time.Microsecond)
						for _, k := range ks {
							q.AddWork(k, now, at)
						}
						<-released
					}
					held = (float64(heapNow()) - float64(before)) / float64(n)
					b.StopTimer()
					q.Close()
					runtime.KeepAlive(q)
					b.StartTimer()
				}
				b.ReportMetric(held, "held-B/item")
			})
		}
	}
}

// errFired fails the work of releasingQueue's queue, so that it is not
// retried and the failure hook tells when its key was released.
var errFired = timedqueue.Permanent(errors.New("fired"))

// releasingQueue returns a queue of the named implementation, whose work
// does nothing, and a channel closed once n schedules have run and had their
// keys released: the baseline deletes them just after the work returns. Ours
// calls its failure hook after the release, so its work fails, for good
// (success releases the same memory but calls nothing after).
func releasingQueue(name string, n int) (benchQueue, <-chan struct{}) {
	ch := make(chan struct{})
	var count atomic.Int64
	released := func() {
		if count.Add(1) == int64(n) {
			close(ch)
		}
	}
	if name == "baseline" {
		q := newBaseline(func(context.Context, string) error { return nil })
		q.released = released
		return q, ch
	}
	return newOurs(func(context.Context, string) error { return errFired },
		timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 1}),
		timedqueue.WithFailureHook(func(timedqueue.TimedWorker[string], error) { released() })), ch
}

func heapNow() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkAddWork adds keys to a queue holding n to 1.5n pending items.
//
// Its ratio at 1M swung from 1.2× to 4.3× across runs of scripts/bench.sh,
// which runs it with -benchtime 200000x: 200k adds on top of 1M. What moved
// it (CPU and heap profiles, GODEBUG=gctrace=1, B/op): until the slab was
// paged, the add that found the slab full copied all of it (64–80 MB) under
// the queue's lock, and the new array and the heap's (16 B per item) brought
// a GC cycle marking the whole heap; over only 200k adds that came to 530
// B/op and ~200 ns/op, and in the first run of a process, whose new arrays
// were fresh memory from the OS (page faults), to 1.67 µs/op against ~290 in
// later runs. The slab now grows a page (64 KiB for a string key) at a
// time; what B/op is left at 200000x is the heap's array and the pages. An add itself is three cache misses (the index slot,
// the slab entry, the heap's tail), so it also follows the load other
// processes put on the caches. bench/upstream measures the same against
// upstream's own queue.
func BenchmarkAddWork(b *testing.B) {
	benchPending(b, true, func(b *testing.B, q benchQueue, ks []string, n int, now time.Time) {
		fill(q, ks[:n], now)
		j := n
		for b.Loop() {
			if j == len(ks) {
				b.StopTimer()
				for _, k := range ks[n:] {
					q.CancelWork(k)
				}
				j = n
				b.StartTimer()
			}
			q.AddWork(ks[j], now, farTime(now, j))
			j++
		}
	})
}

// BenchmarkUpdateWork moves pending items to another FireAt.
func BenchmarkUpdateWork(b *testing.B) {
	benchPending(b, false, func(b *testing.B, q benchQueue, ks []string, n int, now time.Time) {
		fill(q, ks, now)
		i := 0
		for b.Loop() {
			q.UpdateWork(ks[i%n], now, farTime(now, i+n+7))
			i++
		}
	})
}

// BenchmarkReschedule is rescheduling churn: n pending items, each call
// moving a random one to a random FireAt (fill's spread), so that each call
// reaches the index, the slab and the key at random, as informer events do
// (BenchmarkUpdateWork takes the keys in turn).
//
// A call costs a handful of cache misses (the key's bytes, the index slot,
// the slab entry, the heap's sift) and, amortised, the compaction of stale
// heap nodes, which reads the slab in order. cachegrind counts them where
// timings on the shared VM move by ±50%.
func BenchmarkReschedule(b *testing.B) {
	benchPending(b, false, func(b *testing.B, q benchQueue, ks []string, n int, now time.Time) {
		fill(q, ks, now)
		x := uint64(1)
		for b.Loop() {
			x = xorshift(x)
			q.UpdateWork(ks[x%uint64(n)], now, farTime(now, int(x>>33)))
		}
	})
}

// xorshift returns the next value of a xorshift64 generator: random enough
// to pick keys and times, and cheap next to what it measures.
func xorshift(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// BenchmarkCancelWork cancels pending items of a queue holding n/2 to n.
func BenchmarkCancelWork(b *testing.B) {
	benchPending(b, false, func(b *testing.B, q benchQueue, ks []string, n int, now time.Time) {
		fill(q, ks, now)
		j := 0
		for b.Loop() {
			if j == n/2 {
				b.StopTimer()
				for i, k := range ks[:n/2] {
					q.AddWork(k, now, farTime(now, i))
				}
				j = 0
				b.StartTimer()
			}
			q.CancelWork(ks[j])
			j++
		}
	})
}

// benchPending runs loop for each size n and implementation, on a new queue
// and n keys (with spare, n/2 more), with allocations reported; loop fills
// the queue and times its operation.
func benchPending(b *testing.B, spare bool, loop func(b *testing.B, q benchQueue, ks []string, n int, now time.Time)) {
	for _, n := range sizes {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("impl=%s/pending=%d", impl.name, n), func(b *testing.B) {
				skipLarge(b, n)
				nk := n
				if spare {
					nk += n / 2
				}
				ks := benchKeys(nk)
				now := time.Now()
				q := impl.make(noWork)
				defer q.Close()
				b.ReportAllocs()
				loop(b, q, ks, n, now)
			})
		}
	}
}

// BenchmarkBurst makes 100k items due at once, each sleeping 1 ms, and reports
// the wall time per burst and the peak number of goroutines. impl=pool is a
// bare pool of 64 goroutines doing the same sleeps: the floor for a limit of 64.
func BenchmarkBurst(b *testing.B) {
	const (
		n     = 100_000
		limit = 64
	)
	ks := benchKeys(n)
	var (
		done sync.WaitGroup
		peak atomic.Int64
	)
	work := func(context.Context, string) error {
		if g := int64(runtime.NumGoroutine()); g > peak.Load() {
			peak.Store(g) // racy max, good enough for a peak
		}
		// The 1 ms of work itself (an API call's latency), as a timer wait;
		// nothing here waits for another goroutine.
		t := time.NewTimer(time.Millisecond)
		<-t.C
		done.Done()
		return nil
	}
	run := func(b *testing.B, burst func()) {
		var maxPeak int64
		for b.Loop() {
			peak.Store(0)
			done.Add(n)
			burst()
			done.Wait()
			maxPeak = max(maxPeak, peak.Load())
		}
		b.ReportMetric(float64(maxPeak), "peak-goroutines")
	}
	b.Run("impl=taintkit", func(b *testing.B) {
		q := newOurs(work, timedqueue.WithMaxConcurrency(limit))
		defer q.Close()
		run(b, func() {
			now := time.Now()
			for _, k := range ks {
				q.AddWork(k, now, now)
			}
		})
	})
	b.Run("impl=baseline", func(b *testing.B) {
		q := newBaseline(work)
		defer q.Close()
		run(b, func() {
			now := time.Now()
			for _, k := range ks {
				q.AddWork(k, now, now)
			}
		})
	})
	b.Run("impl=pool", func(b *testing.B) {
		run(b, func() {
			var next atomic.Int64
			for range limit {
				go func() {
					for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
						_ = work(context.Background(), ks[i])
					}
				}()
			}
		})
	})
}

// BenchmarkRunDue makes 10k no-op items due at once and waits for them to
// run: the queue's own cost per attempt (start, work ctx, end), reported as
// ns/attempt and allocs/op (per 10k attempts).
func BenchmarkRunDue(b *testing.B) {
	const n = 10_000
	ks := benchKeys(n)
	var done sync.WaitGroup
	q := newOurs(func(context.Context, string) error { done.Done(); return nil })
	defer q.Close()
	b.ReportAllocs()
	for b.Loop() {
		done.Add(n)
		now := time.Now()
		for _, k := range ks {
			if !q.AddWork(k, now, now) { // the last run of k has not ended yet
				done.Done()
			}
		}
		done.Wait()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N*n), "ns/attempt")
}

// BenchmarkLateness spreads 50k no-op items over 2 s on the real clock and
// reports the p50 and p99 of start − FireAt in milliseconds.
func BenchmarkLateness(b *testing.B) {
	const (
		n      = 50_000
		spread = 2 * time.Second
	)
	ks := benchKeys(n)
	index := make(map[string]int, n)
	for i, k := range ks {
		index[k] = i
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			late := make([]time.Duration, n)
			fire := make([]time.Time, n)
			var done sync.WaitGroup
			work := func(_ context.Context, k string) error {
				i := index[k]
				late[i] = time.Since(fire[i])
				done.Done()
				return nil
			}
			q := impl.make(work)
			defer q.Close()
			var all []time.Duration
			for b.Loop() {
				start := time.Now().Add(200 * time.Millisecond)
				for i := range fire {
					fire[i] = start.Add(spread * time.Duration(i) / n)
				}
				done.Add(n)
				for i, k := range ks {
					q.AddWork(k, start, fire[i])
				}
				done.Wait()
				all = append(all, late...)
			}
			slices.Sort(all)
			ms := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e6 }
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}
