package workqueue_test

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/taintkit/taintkit/workqueue"
)

// The benchmarks put this queue beside its peers in the same run, each as
// it is and through the interface a controller uses: client-go's
// rate-limiting (delaying) queue and controller-runtime's priority queue,
// on the real clock, without metrics. Keys are "namespace/name" strings
// made once, so that their memory is counted apart. Read the ratios of one
// run: single timings on a shared machine move by ±20% and more.
//
//	go test -run '^$' -bench . -benchtime 1x -count 3 .

// peer is a queue under test and the two things only ours can do, which a
// peer's caller can only ask of it as an AddAfter (Schedule) or not at all
// (Cancel).
type peer struct {
	name     string
	new      func() clientworkqueue.TypedRateLimitingInterface[string]
	schedule func(q clientworkqueue.TypedRateLimitingInterface[string], key string, at time.Time)
	cancel   func(q clientworkqueue.TypedRateLimitingInterface[string], key string)
}

var peers = []peer{
	{
		name: "taintkit",
		new: func() clientworkqueue.TypedRateLimitingInterface[string] {
			return workqueue.NewRateLimiting(workqueue.Config[string]{})
		},
		schedule: func(q clientworkqueue.TypedRateLimitingInterface[string], key string, at time.Time) {
			q.(*workqueue.Queue[string]).Schedule(key, at)
		},
		cancel: func(q clientworkqueue.TypedRateLimitingInterface[string], key string) {
			q.(*workqueue.Queue[string]).Cancel(key)
		},
	},
	{
		name: "client-go",
		new: func() clientworkqueue.TypedRateLimitingInterface[string] {
			return clientworkqueue.NewTypedRateLimitingQueueWithConfig(clientworkqueue.DefaultTypedControllerRateLimiter[string](),
				clientworkqueue.TypedRateLimitingQueueConfig[string]{})
		},
	},
	{
		name: "controller-runtime",
		new: func() clientworkqueue.TypedRateLimitingInterface[string] {
			return priorityqueue.New[string]("")
		},
	},
}

// schedule asks q for key at at: Schedule for ours, AddAfter for a peer,
// whose earlier time wins.
func (p peer) scheduleAt(q clientworkqueue.TypedRateLimitingInterface[string], key string, at time.Time) {
	if p.schedule != nil {
		p.schedule(q, key, at)
		return
	}
	q.AddAfter(key, time.Until(at))
}

var (
	keysOnce  sync.Once
	benchKeys []string
)

// keysFor returns n keys, made once for every benchmark.
func keysFor(n int) []string {
	keysOnce.Do(func() {
		benchKeys = make([]string, 1_100_000)
		for i := range benchKeys {
			benchKeys[i] = fmt.Sprintf("namespace-%d/pod-%d", i%1000, i)
		}
	})
	return benchKeys[:n]
}

// size returns n, or n/10 with -short.
func size(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}

// inAnHour returns the i-th delay: an hour ahead, spread over an hour.
func inAnHour(i int) time.Duration {
	return time.Hour + time.Duration(uint64(i)*2654435761%3_600_000)*time.Millisecond
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// goroutinesBack waits until the process runs no more goroutines than
// before, as it did before a queue was made: client-go's and
// controller-runtime's queues keep their items until their goroutines, told
// to stop by ShutDown, have returned. A goroutine that never returns is
// given 10 s.
func goroutinesBack(before int) {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
}

// BenchmarkAddAfter fills a queue of each kind with n items due in an hour,
// timing the fill (IMPL-fill-ns/add: growth included), and reports the heap
// per waiting item (IMPL-B/waiting); then it times n/10 more AddAfters with
// n waiting: wall time per add (IMPL-ns/add) and the process's CPU time per
// add (IMPL-cpu-ns/add), which counts the work a queue hands to a goroutine
// of its own (client-go's and controller-runtime's do) on another core. Len
// ends each timing: it makes controller-runtime's queue take in the adds it
// has buffered. speedup is the better peer's ns/add over ours, fill-speedup
// the same for the fill, mem-ratio ours B/waiting over the better peer's.
// Each iteration runs every queue, each first in turn.
func BenchmarkAddAfter(b *testing.B) {
	n := size(1_000_000)
	keys := keysFor(n + n/10)
	mem, fill, wall, cpu := results{}, results{}, results{}, results{}
	iter := 0
	for b.Loop() {
		for j := range peers {
			p := peers[(j+iter)%len(peers)]
			goroutines, before := runtime.NumGoroutine(), heapAlloc()
			q := p.new()
			start := time.Now()
			for i, k := range keys[:n] {
				q.AddAfter(k, inAnHour(i))
			}
			q.Len()
			fill.add(p.name, float64(time.Since(start).Nanoseconds())/float64(n))
			mem.add(p.name, (float64(heapAlloc())-float64(before))/float64(n))
			start, cpu0 := time.Now(), cpuTime()
			for i, k := range keys[n:] {
				q.AddAfter(k, inAnHour(n+i))
			}
			q.Len()
			wall.add(p.name, float64(time.Since(start).Nanoseconds())/float64(n/10))
			cpu.add(p.name, float64((cpuTime()-cpu0).Nanoseconds())/float64(n/10))
			q.ShutDown()
			goroutinesBack(goroutines)
		}
		iter++
	}
	mem.report(b, "B/waiting")
	fill.report(b, "fill-ns/add")
	wall.report(b, "ns/add")
	cpu.report(b, "cpu-ns/add")
	b.ReportMetric(wall.bestPeer(false)/wall.median("taintkit"), "speedup")
	b.ReportMetric(fill.bestPeer(false)/fill.median("taintkit"), "fill-speedup")
	b.ReportMetric(mem.median("taintkit")/mem.bestPeer(false), "mem-ratio")
}

// BenchmarkGetDone makes n items ready in a queue of each kind, then has
// 100 workers Get and Done them until all were handed out, and reports the
// items handed out per second (IMPL-items/s), and ratio, ours over the
// better peer's. Each iteration runs every queue, each first in turn; ratio
// is the median of the iterations' own ratios, as the machine's load moves
// between iterations more than within one.
func BenchmarkGetDone(b *testing.B) {
	n, workers := size(100_000), 100
	keys := keysFor(n)
	rate := results{}
	iter := 0
	for b.Loop() {
		for j := range peers {
			p := peers[(j+iter)%len(peers)]
			q := p.new()
			for _, k := range keys {
				q.Add(k)
			}
			q.Len()
			var left atomic.Int64
			left.Store(int64(n))
			var wg sync.WaitGroup
			start := time.Now()
			for range workers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						item, _ := q.Get()
						q.Done(item)
					}
				})
			}
			wg.Wait()
			rate.add(p.name, float64(n)/time.Since(start).Seconds())
			q.ShutDown()
		}
		iter++
	}
	rate.report(b, "items/s")
	b.ReportMetric(rate.medianRatio(true), "ratio")
}

// results are a benchmark's figures by queue.
type results map[string][]float64

func (r results) add(impl string, v float64) { r[impl] = append(r[impl], v) }

func (r results) median(impl string) float64 {
	v := slices.Sorted(slices.Values(r[impl]))
	return v[len(v)/2]
}

// bestPeer returns the better of the peers' medians: the lowest, or the
// highest if higher is better.
func (r results) bestPeer(higher bool) float64 {
	v := r.median(peers[1].name)
	for _, p := range peers[2:] {
		if m := r.median(p.name); m < v != higher {
			v = m
		}
	}
	return v
}

// medianRatio returns the median over the iterations of ours over the
// better peer's figure in that iteration: the highest, or the lowest if
// higher is not better.
func (r results) medianRatio(higher bool) float64 {
	var ratios []float64
	for i, ours := range r[peers[0].name] {
		best := r[peers[1].name][i]
		for _, p := range peers[2:] {
			if v := r[p.name][i]; v < best != higher {
				best = v
			}
		}
		ratios = append(ratios, ours/best)
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

func (r results) report(b *testing.B, unit string) {
	for _, p := range peers {
		b.ReportMetric(r.median(p.name), p.name+"-"+unit)
	}
}

// BenchmarkLateness spreads n items over spread on the real clock, the
// first 200 ms after the adds begin, handed out to 8 workers, and reports
// percentiles of the lateness (Get's return − the item's time) in
// milliseconds, and p99-ratio, ours over the better peer's. Each iteration runs every queue, one after the other, each
// first in turn, so that the machine's load weighs on them alike.
func BenchmarkLateness(b *testing.B) {
	n, spread := 50_000, 2*time.Second
	if testing.Short() {
		n, spread = 5_000, 500*time.Millisecond
	}
	keys := keysFor(n)
	index := make(map[string]int, n)
	for i, k := range keys {
		index[k] = i
	}
	late := map[string][]time.Duration{}
	iter := 0
	for b.Loop() {
		for j := range peers {
			p := peers[(j+iter)%len(peers)]
			late[p.name] = append(late[p.name], lateness(p, keys, index, spread)...)
		}
		iter++
	}
	p99 := results{}
	for _, p := range peers {
		all := late[p.name]
		slices.Sort(all)
		ms := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))]) / 1e6 }
		b.ReportMetric(ms(0.50), p.name+"-p50-ms")
		b.ReportMetric(ms(0.99), p.name+"-p99-ms")
		p99.add(p.name, ms(0.99))
	}
	b.ReportMetric(p99.median("taintkit")/p99.bestPeer(false), "p99-ratio")
}

func lateness(p peer, keys []string, index map[string]int, spread time.Duration) []time.Duration {
	q := p.new()
	defer q.ShutDown()
	due := make([]time.Time, len(keys))
	late := make([]time.Duration, len(keys))
	var wg sync.WaitGroup
	wg.Add(len(keys))
	for range 8 {
		go func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				i := index[item]
				late[i] = time.Since(due[i])
				q.Done(item)
				wg.Done()
			}
		}()
	}
	first := time.Now().Add(200 * time.Millisecond)
	for i := range keys {
		due[i] = first.Add(spread * time.Duration(i) / time.Duration(len(keys)))
	}
	for i, k := range keys {
		q.AddAfter(k, time.Until(due[i]))
	}
	wg.Wait()
	return late
}

// BenchmarkPostponeCancel is the workload of a reconciler whose objects say
// when they are next due: n items are added for a time in the next second;
// then a third of them are put off by half a second, and a third cancelled
// (their objects deleted). Ours is asked to Schedule and Cancel; a peer can
// only be asked to AddAfter the later time, which its earlier-wins rule
// ignores, and nothing for a cancel. The workers reconcile as a controller
// does that keeps each object's wanted time itself: a hand-out before that
// time, or of a cancelled item, is unwanted (counted in unwanted/op), and
// the item is added after the time still to wait. It reports the unwanted
// hand-outs (IMPL-unwanted); the wanted ones are checked, each once, never
// early. Each iteration runs every queue, each first in turn.
func BenchmarkPostponeCancel(b *testing.B) {
	keys := keysFor(size(30_000))
	unwanted := results{}
	iter := 0
	for b.Loop() {
		for j := range peers {
			p := peers[(j+iter)%len(peers)]
			unwanted.add(p.name, float64(postponeCancel(b, p, keys)))
		}
		iter++
	}
	unwanted.report(b, "unwanted")
}

func postponeCancel(b *testing.B, p peer, keys []string) (unwanted int64) {
	q := p.new()
	defer q.ShutDown()
	type want struct {
		at        time.Time // zero: cancelled
		handedOut bool
	}
	var mu sync.Mutex
	wants := make(map[string]*want, len(keys))
	wanted := 0
	first := time.Now().Add(200 * time.Millisecond)
	var handled sync.WaitGroup
	for i, k := range keys {
		at := first.Add(time.Duration(i) * time.Second / time.Duration(len(keys)))
		wants[k] = &want{at: at}
		p.scheduleAt(q, k, at)
	}
	for i, k := range keys {
		w := wants[k]
		mu.Lock()
		switch i % 3 {
		case 0: // the object's time moves later
			w.at = w.at.Add(500 * time.Millisecond)
			p.scheduleAt(q, k, w.at)
		case 1: // the object is deleted
			w.at = time.Time{}
			if p.cancel != nil {
				p.cancel(q, k)
			}
		}
		if !w.at.IsZero() {
			wanted++
		}
		mu.Unlock()
	}
	handled.Add(wanted)
	for range 8 {
		go func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				now := time.Now()
				mu.Lock()
				switch w := wants[item]; {
				case w.at.IsZero() || w.handedOut:
					unwanted++
				case now.Before(w.at):
					unwanted++
					q.AddAfter(item, w.at.Sub(now))
				default:
					w.handedOut = true
					handled.Done()
				}
				mu.Unlock()
				q.Done(item)
			}
		}()
	}
	handled.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k, w := range wants {
		if !w.at.IsZero() && !w.handedOut {
			b.Fatalf("%s: not handed out", k)
		}
	}
	return unwanted
}

// BenchmarkAddFloor measures what any AddAfter of a new key into a queue of
// n waiting keys that collapses duplicates must do at least: read the clock,
// take a lock, hash the key and read the one place of a table of n keys
// (2n words, 16 MB at 1M keys, as a hash index at most 3/4 full) that its
// hash picks: no probing, no key compared, nothing written. An add cannot
// cost less than this on the machine (floor-ns/add); BenchmarkAddAfter
// measures the queues' adds.
func BenchmarkAddFloor(b *testing.B) {
	n := size(1_000_000)
	keys := keysFor(n + n/10)
	table := make([]uint64, 1<<bits.Len(uint(2*n-1)))
	for i := range table {
		table[i] = uint64(i) // touched: the pages are the process's
	}
	seed := maphash.MakeSeed()
	var mu sync.Mutex
	var sum uint64
	var last time.Time
	for b.Loop() {
		for _, k := range keys[n:] {
			now := time.Now()
			h := maphash.String(seed, k)
			mu.Lock()
			sum += table[h&uint64(len(table)-1)]
			last = now
			mu.Unlock()
		}
	}
	if sum == 0 || last.IsZero() {
		b.Fatal("nothing read")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n/10)), "floor-ns/add")
}
