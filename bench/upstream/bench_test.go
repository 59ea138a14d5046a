package upstream

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
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/tainteviction"

	"github.com/taintkit/taintkit/timedqueue"
)

// queue is what the benchmarks need of either implementation. Keys are
// "namespace/name" strings; upstream's are built from its WorkArgs.
type queue interface {
	add(i int, createdAt, fireAt time.Time)
	update(i int, createdAt, fireAt time.Time)
	cancel(i int)
	close()
}

// items are the keys of the benchmarks, built once and shared by both
// implementations, so that their memory is counted apart: ours gets the key
// strings, upstream its *WorkArgs (from which it builds its own key string on
// every call: that string is upstream's cost and counted).
type items struct {
	keys []string
	args []*tainteviction.WorkArgs
	idx  map[string]int
}

var (
	itemsOnce sync.Once
	all       items
)

const maxItems = 1_500_000

func getItems() *items {
	itemsOnce.Do(func() {
		all.keys = make([]string, size(maxItems))
		all.args = make([]*tainteviction.WorkArgs, size(maxItems))
		for i := range all.keys {
			ns, name := fmt.Sprintf("namespace-%d", i%1000), fmt.Sprintf("pod-%d", i)
			all.keys[i] = ns + "/" + name
			all.args[i] = tainteviction.NewWorkArgs(name, ns)
		}
	})
	return &all
}

// index returns the map from key to item number, built on first use (only
// the lateness benchmark needs it).
func (it *items) index() map[string]int {
	if it.idx == nil {
		it.idx = make(map[string]int, len(it.keys))
		for i, k := range it.keys {
			it.idx[k] = i
		}
	}
	return it.idx
}

type ours struct {
	q  *timedqueue.TimedWorkerQueue[string]
	it *items
}

func newOurs(work func(key string, start time.Time)) queue {
	q, err := timedqueue.New(func(_ context.Context, key string) error { work(key, time.Now()); return nil },
		timedqueue.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	return &ours{q, getItems()}
}

func (o *ours) add(i int, createdAt, fireAt time.Time) { o.q.AddWork(o.it.keys[i], createdAt, fireAt) }
func (o *ours) update(i int, createdAt, fireAt time.Time) {
	o.q.UpdateWork(o.it.keys[i], createdAt, fireAt)
}
func (o *ours) cancel(i int) { o.q.CancelWork(o.it.keys[i]) }
func (o *ours) close()       { _ = o.q.Shutdown(context.Background()) }

// theirs is upstream's TimedWorkerQueue, as the taint-eviction controller
// uses it: AddWork with a ctx carrying klog's logger, CancelWork by key.
type theirs struct {
	q      *tainteviction.TimedWorkerQueue
	ctx    context.Context
	logger klog.Logger
	it     *items
}

func newTheirs(work func(key string, start time.Time)) queue {
	it := getItems()
	q := tainteviction.CreateWorkerQueue(func(_ context.Context, _ time.Time, args *tainteviction.WorkArgs) error {
		start := time.Now()
		work(args.KeyFromWorkArgs(), start)
		return nil
	})
	return &theirs{q: q, ctx: context.Background(), logger: klog.Background(), it: it}
}

func (t *theirs) add(i int, createdAt, fireAt time.Time) {
	t.q.AddWork(t.ctx, t.it.args[i], createdAt, fireAt)
}
func (t *theirs) update(i int, createdAt, fireAt time.Time) {
	t.q.UpdateWork(t.ctx, t.it.args[i], createdAt, fireAt)
}
func (t *theirs) cancel(i int) { t.q.CancelWork(t.logger, t.it.keys[i]) }

func (t *theirs) close() { t.q.CancelAndWait() }

var impls = []struct {
	name string
	make func(work func(key string, start time.Time)) queue
}{
	{"taintkit", newOurs},
	{"upstream", newTheirs},
}

// releasing is, per implementation, a queue whose work does nothing and a
// func that returns once n schedules have run and had their keys released.
var releasing = map[string]func(n int) (queue, func()){
	// Ours calls its failure hook after it released the key, so the work
	// fails, for good (success releases the same memory but calls nothing
	// after).
	"taintkit": func(n int) (queue, func()) {
		done := countdown(n)
		q, err := timedqueue.New(func(context.Context, string) error { return errFired },
			timedqueue.WithLogger(logr.Discard()),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 1}))
		if err != nil {
			panic(err)
		}
		q.SetFailureHook(func(timedqueue.TimedWorker[string], error) { done.tick() })
		return &ours{q, getItems()}, done.wait
	},
	// Upstream logs "Worker finished, removing" at V(4), holding its lock,
	// just before it deletes the key: once n are logged, taking that lock
	// waits for the last delete.
	"upstream": func(n int) (queue, func()) {
		done := countdown(n)
		t := newTheirs(func(string, time.Time) {}).(*theirs)
		t.ctx = klog.NewContext(context.Background(), logr.New(finishedSink{done.tick}))
		return t, func() {
			done.wait()
			t.q.Lock()
			//lint:ignore SA2001 an empty critical section: a barrier for the last delete
			t.q.Unlock()
		}
	},
}

var errFired = timedqueue.Permanent(errors.New("fired"))

// counter closes its channel at the n-th tick.
type counter struct {
	n    int64
	seen *atomic.Int64
	ch   chan struct{}
}

func countdown(n int) counter {
	return counter{int64(n), new(atomic.Int64), make(chan struct{})}
}

func (c counter) tick() {
	if c.seen.Add(1) == c.n {
		close(c.ch)
	}
}

func (c counter) wait() { <-c.ch }

// finishedSink is a logr sink that calls finished for each "Worker
// finished, removing" of upstream's queue, and drops everything else.
type finishedSink struct{ finished func() }

func (finishedSink) Init(logr.RuntimeInfo)  {}
func (finishedSink) Enabled(level int) bool { return level <= 4 }
func (s finishedSink) Info(_ int, msg string, _ ...any) {
	if msg == "Worker finished, removing" {
		s.finished()
	}
}
func (finishedSink) Error(error, string, ...any)      {}
func (s finishedSink) WithValues(...any) logr.LogSink { return s }
func (s finishedSink) WithName(string) logr.LogSink   { return s }

func noWork(string, time.Time) {}

// size returns n, or n/10 with -short.
func size(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}

// farTime returns the i-th FireAt: a day ahead, spread over an hour, so that
// nothing fires during a run.
func farTime(base time.Time, i int) time.Time {
	return base.Add(24*time.Hour + time.Duration(uint64(i)*2654435761%3600_000)*time.Millisecond)
}

func fill(q queue, n int, now time.Time) {
	for i := range n {
		q.add(i, now, farTime(now, i))
	}
}

// heapAlloc returns the live heap after a full GC.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// perItem returns (after − before)/n, which may be negative.
func perItem(before, after uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}

// BenchmarkMemory reports the heap per pending item with n pending
// (pending-B/item; the keys are counted apart), and the heap the queue still
// holds once every item was cancelled (cancelled-B/item).
//
//	cd bench/upstream && go test -run '^$' -bench Memory -count 10 . | tee mem.txt
func BenchmarkMemory(b *testing.B) {
	n := size(1_000_000)
	getItems()
	for _, impl := range impls {
		b.Run(fmt.Sprintf("impl=%s/pending=%d", impl.name, n), func(b *testing.B) {
			var pending, cancelled float64
			for b.Loop() {
				before := heapAlloc()
				q := impl.make(noWork)
				now := time.Now()
				fill(q, n, now)
				pending = perItem(before, heapAlloc(), n)
				for i := range n {
					q.cancel(i)
				}
				cancelled = perItem(before, heapAlloc(), n)
				q.close()
				runtime.KeepAlive(q)
			}
			b.ReportMetric(pending, "pending-B/item")
			b.ReportMetric(cancelled, "cancelled-B/item")
		})
	}
}

// BenchmarkMemoryAfterFire makes n items due at once, waits until every one
// has run and been released, and reports the heap the queue still holds
// (fired-B/item).
func BenchmarkMemoryAfterFire(b *testing.B) {
	n := size(1_000_000)
	getItems()
	for _, impl := range impls {
		b.Run(fmt.Sprintf("impl=%s/items=%d", impl.name, n), func(b *testing.B) {
			var fired float64
			for b.Loop() {
				before := heapAlloc()
				q, released := releasing[impl.name](n)
				// Every item is due at once, after the adds: a mass firing of
				// n pending items.
				now := time.Now()
				at := now.Add(fireDelay(n))
				for i := range n {
					q.add(i, now, at)
				}
				released()
				fired = perItem(before, heapAlloc(), n)
				q.close()
				runtime.KeepAlive(q)
			}
			b.ReportMetric(fired, "fired-B/item")
		})
	}
}

// fireDelay is how long after the first add a mass firing of n items is due:
// after the last add, for both implementations.
func fireDelay(n int) time.Duration {
	return time.Duration(n) * 4 * time.Microsecond
}

// BenchmarkAddWork adds items to a queue holding n to 1.5n pending items.
func BenchmarkAddWork(b *testing.B) {
	n := size(1_000_000)
	getItems()
	for _, impl := range impls {
		b.Run(fmt.Sprintf("impl=%s/pending=%d", impl.name, n), func(b *testing.B) {
			q := impl.make(noWork)
			defer q.close()
			now := time.Now()
			fill(q, n, now)
			b.ReportAllocs()
			j := n
			for b.Loop() {
				if j == n+n/2 {
					b.StopTimer()
					for i := n; i < j; i++ {
						q.cancel(i)
					}
					j = n
					b.StartTimer()
				}
				q.add(j, now, farTime(now, j))
				j++
			}
		})
	}
}

// BenchmarkReschedule is rescheduling churn: n pending items (100k; 10k
// with -short), then UpdateWork of a random one to a random FireAt (a day
// ahead, within an hour, as fill's), so each call moves a pending item: the
// workload of BenchmarkUpdateWork's keys=random/times=day. Ours costs a few
// dependent cache misses a call (the key's bytes, the index slot, the slab
// entry), so it follows the load other processes put on the caches.
//
//	go test -run '^$' -bench Reschedule -benchtime 1000000x -count 10 .
func BenchmarkReschedule(b *testing.B) {
	n := size(100_000)
	getItems()
	for _, impl := range impls {
		b.Run(fmt.Sprintf("impl=%s/pending=%d", impl.name, n), func(b *testing.B) {
			q := impl.make(noWork)
			defer q.close()
			now := time.Now()
			fill(q, n, now)
			b.ReportAllocs()
			r := rng(1)
			for b.Loop() {
				x := r.next()
				q.update(int(x%uint64(n)), now, farTime(now, int(x>>33)))
			}
		})
	}
}

// BenchmarkUpdateWork is UpdateWork as a controller calls it: n pending
// items (100k; 10k with -short) a day ahead, then one UpdateWork per op,
// keys taken in a fixed stride (every 7919th, wrapping), each moved to a
// FireAt in [now+1h, now+2h). keys= and times= vary one thing at a time
// against BenchmarkReschedule's workload (random keys, times a day ahead):
// times=earlier is the controller's, times=day is Reschedule's.
func BenchmarkUpdateWork(b *testing.B) {
	n := size(100_000)
	getItems()
	for _, keys := range []string{"strided", "random"} {
		for _, times := range []string{"earlier", "day"} {
			for _, impl := range impls {
				b.Run(fmt.Sprintf("keys=%s/times=%s/impl=%s/pending=%d", keys, times, impl.name, n), func(b *testing.B) {
					q := impl.make(noWork)
					defer q.close()
					now := time.Now()
					fill(q, n, now)
					b.ReportAllocs()
					r, j := rng(1), 0
					for b.Loop() {
						x := r.next()
						k := j * 7919 % n
						if keys == "random" {
							k = int(x % uint64(n))
						}
						at := now.Add(time.Hour + time.Duration(x>>33%3600_000)*time.Millisecond)
						if times == "day" {
							at = farTime(now, int(x>>33))
						}
						q.update(k, now, at)
						j++
					}
				})
			}
		}
	}
}

// rng is a xorshift64* generator: random enough to pick keys and times, and
// cheap next to what it measures.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	return x * 2685821657736338717
}

// BenchmarkLateness spreads n no-op items evenly over spread on the real
// clock, FireAt from 200 ms after the adds begin, and reports percentiles of
// start − FireAt in milliseconds, start being read first thing in the work
// func. Each iteration runs both implementations, one after the other (in
// turn first), so that the load of a shared machine, which moves by the
// second, weighs on both alike: p99-ratio is taintkit's p99 over upstream's,
// over the iterations of one run.
//
// What sets the figures (found with the queue's timer instrumented, and a
// program re-arming a single timer next to one timer per item): on an idle
// Go process a timer fires through the netpoller, whose epoll_wait timeout
// is in whole milliseconds, at least 1 ms. So every wake-up comes about
// 1.05 ms after the previous one and starts what fell due in between: the
// lateness is spread evenly over 0–1 ms for both implementations (p50 ≈
// 0.55 ms, p99 ≈ 1.07 ms when the machine is quiet). That is the floor of
// the runtime's timers; neither implementation goes below it. Above it, the
// p99 moves with the load of the machine, by whole milliseconds: a wake-up
// that comes one tick late makes the ~25 items of that millisecond late by
// one more millisecond, and 1% of wake-ups late moves the p99 by 1 ms. With
// one timer for the whole queue, each of our wake-ups passes through the
// queue's timer goroutine (a channel receive) and starts a worker goroutine:
// two goroutine hand-offs, as upstream's runtime timer starts a goroutine
// that starts another (wg.Go). Measured in turn in one run, neither is
// steadily ahead; measured one after the other, the load of the machine
// moves one and not the other, which made the ratio swing from 1.02× to
// 1.66× (up to 2.1× here, with upstream's p99 at 1.07 ms every time and
// ours at 1.08–2.26 ms). The queue's code was not the cause: the queue as it
// was before this benchmark measures 1.01× in turn on a quiet machine. (A
// func timer instead of the channel timer, the runtime starting the
// callback's goroutine itself, did no better; GOGC=off changed nothing: not
// the GC.)
func BenchmarkLateness(b *testing.B) {
	n, spread := 50_000, 2*time.Second
	if testing.Short() {
		n, spread = 5_000, 500*time.Millisecond
	}
	it := getItems()
	index := it.index()
	late := make([]time.Duration, n)
	fire := make([]time.Time, n)
	var done sync.WaitGroup
	work := func(k string, start time.Time) {
		i := index[k]
		late[i] = start.Sub(fire[i])
		done.Done()
	}
	type result struct {
		name string
		q    queue
		all  []time.Duration
	}
	var results []*result
	for _, impl := range impls {
		q := impl.make(work)
		defer q.close()
		results = append(results, &result{name: impl.name, q: q})
	}
	iter := 0
	for b.Loop() {
		for j := range results {
			r := results[(j+iter)%len(results)]
			start := time.Now().Add(200 * time.Millisecond)
			for i := range fire {
				fire[i] = start.Add(spread * time.Duration(i) / time.Duration(n))
			}
			done.Add(n)
			for i := range n {
				// upstream's delay is fireAt − createdAt: createdAt must be now
				r.q.add(i, time.Now(), fire[i])
			}
			done.Wait()
			r.all = append(r.all, late...)
		}
		iter++
	}
	p99 := map[string]float64{}
	for _, r := range results {
		slices.Sort(r.all)
		ms := func(p float64) float64 { return float64(r.all[int(p*float64(len(r.all)-1))]) / 1e6 }
		b.ReportMetric(ms(0.50), r.name+"-p50-ms")
		b.ReportMetric(ms(0.99), r.name+"-p99-ms")
		b.ReportMetric(ms(0.999), r.name+"-p999-ms")
		p99[r.name] = ms(0.99)
	}
	b.ReportMetric(p99["taintkit"]/p99["upstream"], "p99-ratio")
}
