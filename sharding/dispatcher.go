package sharding

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Dispatcher hands items to one worker per shard, as the package
// documentation describes. It is safe for concurrent use by multiple
// goroutines. The zero value is not usable; call [New].
type Dispatcher[H, L comparable] struct {
	shards   []*shard[H, L]
	n        uint32 // len(shards)
	clock    clock.Clock
	retry    RetryPolicy // with defaults applied
	maxBurst int
	log      klog.Logger
	onDrop   func(Drop[H, L])
	high     dispatcherLane[H, L, H]
	low      dispatcherLane[H, L, L]

	started atomic.Bool

	retryMu   sync.Mutex    // guards high.heap, low.heap and retrySeq; taken before a shard's mu
	retrySeq  uint64        // numbers the retries scheduled: equal due times keep failure order
	retryWake chan struct{} // capacity 1: a retry became the earliest

	// dueHint is the earliest due time over both retry heaps, as dueNanos
	// says, or noRetry if both are empty. It is written with retryMu held,
	// after the due retries it no longer covers were queued, so a worker or
	// add that reads a hint later than its own now knows every retry due by
	// then is already in its lane.
	dueHint atomic.Int64
}

// dispatcherLane is the dispatcher-wide side of one lane (its key func,
// handler, metrics and retry heap), as lane is a shard's side; T is H or L.
type dispatcherLane[H, L, T comparable] struct {
	id     Lane
	key    func(T) string
	handle func(context.Context, T) error
	of     func(*shard[H, L]) *lane[T]
	drop   func(item T, attempts int, err error) Drop[H, L]
	m      laneMetrics
	heap   retryHeap[T] // guarded by Dispatcher.retryMu
}

// New returns a Dispatcher for cfg, or an error naming the first invalid
// field. Items may be added at once; they are handled once [Dispatcher.Run]
// is called.
func New[H, L comparable](cfg Config[H, L]) (*Dispatcher[H, L], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.Shards
	if n == 0 {
		n = DefaultShards
	}
	d := &Dispatcher[H, L]{
		shards:    make([]*shard[H, L], n),
		n:         uint32(n),
		clock:     cfg.Clock,
		retry:     cfg.Retry.withDefaults(),
		maxBurst:  cfg.MaxHighBurst,
		onDrop:    cfg.OnDrop,
		retryWake: make(chan struct{}, 1),
	}
	d.dueHint.Store(noRetry)
	if d.clock == nil {
		d.clock = clock.RealClock{}
	}
	if cfg.Logger != nil {
		d.log = *cfg.Logger
	} else {
		d.log = klog.Background()
	}
	d.log = d.log.WithName("sharding")
	if cfg.Name != "" {
		d.log = d.log.WithValues("dispatcher", cfg.Name)
	}
	for i := range d.shards {
		d.shards[i] = &shard[H, L]{wake: make(chan struct{}, 1)}
	}
	d.high = dispatcherLane[H, L, H]{
		id:     LaneHigh,
		key:    cfg.HighKey,
		handle: cfg.HandleHigh,
		of:     func(s *shard[H, L]) *lane[H] { return &s.hi },
		drop: func(item H, attempts int, err error) Drop[H, L] {
			return Drop[H, L]{Lane: LaneHigh, High: item, Attempts: attempts, Err: err}
		},
		m: newLaneMetrics(cfg.Metrics, cfg.Name, LaneHigh),
	}
	d.low = dispatcherLane[H, L, L]{
		id:     LaneLow,
		key:    cfg.LowKey,
		handle: cfg.HandleLow,
		of:     func(s *shard[H, L]) *lane[L] { return &s.lo },
		drop: func(item L, attempts int, err error) Drop[H, L] {
			return Drop[H, L]{Lane: LaneLow, Low: item, Attempts: attempts, Err: err}
		},
		m: newLaneMetrics(cfg.Metrics, cfg.Name, LaneLow),
	}
	return d, nil
}

// AddHigh adds a high-priority item, with the effect the package's model
// gives. It never blocks on a worker or handler, and may be called from
// handlers and hooks.
//
// AddHigh refuses the item (counts it in the drops metric and logs it, but
// never passes it to Config.OnDrop) once Run is dropping items at shutdown
// or has returned, if the item is not comparable or not equal to itself
// ([ErrInvalidItem]), or if HighKey panics.
func (d *Dispatcher[H, L]) AddHigh(item H) { add(d, &d.high, item) }

// AddLow adds a low-priority item, as [Dispatcher.AddHigh] does a high one.
func (d *Dispatcher[H, L]) AddLow(item L) { add(d, &d.low, item) }

func add[H, L, T comparable](d *Dispatcher[H, L], lane *dispatcherLane[H, L, T], item T) {
	// A refused add is counted and logged, never passed to OnDrop: a hook
	// that re-adds what it is given would otherwise recurse without end.
	if !validItem(item) {
		lane.m.refused()
		d.log.Error(ErrInvalidItem, "Dropping item", "lane", lane.id)
		return
	}
	key, err := shardKey(lane.key, item)
	if err != nil {
		lane.m.refused()
		d.log.Error(err, "Dropping item: shard key func panicked", "lane", lane.id, "item", item,
			"stack", string(err.(*PanicError).Stack))
		return
	}
	// A retry that came due before this add is queued first: FIFO.
	d.promoteIfDue()
	s := d.shards[fnv1a32(key)%d.n]
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lane.m.refused()
		d.log.V(2).Info("Dropping item added after the dispatcher stopped", "lane", lane.id, "item", item)
		return
	}
	queued, retryCancelled := lane.of(s).add(item)
	s.mu.Unlock()
	if retryCancelled {
		lane.m.backoff.Dec()
	}
	if queued {
		// Metrics are called after the unlock, so a worker's Dec can
		// overtake this Inc: the gauge may read one low for a moment.
		lane.m.depth.Inc()
		s.signal()
	}
}

// shardKey calls key, turning a panic into a *PanicError.
func shardKey[T any](key func(T) string, item T) (k string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return key(item), nil
}

// Len returns the number of items queued, over both lanes and all shards:
// not those being handled or waiting for a retry. It is O(Shards) and, under
// concurrent adds, not a snapshot of one instant.
func (d *Dispatcher[H, L]) Len() int {
	n := 0
	for _, s := range d.shards {
		s.mu.Lock()
		n += s.hi.q.len() + s.lo.q.len()
		s.mu.Unlock()
	}
	return n
}

// Run handles items until ctx is done. Then workers take no new item, running
// handlers see their ctx done, and Run waits for them: the return of every
// handler, and of every goroutine Run started, happens before Run returns. A handler that fails once ctx is done
// is not counted as an attempt nor retried. Last, Run drops the items still
// queued or waiting for a retry, each counted and passed to Config.OnDrop
// with [ErrStopped], and logs their number.
//
// Run may be called once. A second call logs an error and returns at once.
func (d *Dispatcher[H, L]) Run(ctx context.Context) {
	if !d.started.CompareAndSwap(false, true) {
		d.log.Error(errors.New("sharding: Run called more than once"), "Ignoring the call")
		return
	}
	var wg sync.WaitGroup
	for i := range d.shards {
		wg.Go(func() { d.work(ctx, &wg, i) })
	}
	wg.Go(func() { d.retryLoop(ctx) })
	wg.Wait()
	d.stop()
}

// work runs the worker of shard idx until ctx is done.
func (d *Dispatcher[H, L]) work(ctx context.Context, wg *sync.WaitGroup, idx int) {
	// A handler or hook that calls runtime.Goexit (t.FailNow does) ends
	// this goroutine in the middle of the loop, with the attempt already
	// settled by handle. A replacement takes over the shard. It is added to
	// wg before this goroutine's own wg.Done runs (that deferred call comes
	// last), so Run's Wait covers it.
	returned := false
	defer func() {
		if !returned {
			wg.Go(func() { d.work(ctx, wg, idx) })
		}
	}()
	d.workLoop(ctx, idx)
	returned = true
}

// workLoop takes and handles the items of shard idx until ctx is done.
func (d *Dispatcher[H, L]) workLoop(ctx context.Context, idx int) {
	s := d.shards[idx]
	done := ctx.Done()
	for {
		select {
		case <-done:
			return
		default:
		}
		// A retry that came due is queued before the pick, so a due high
		// item is never overtaken by a queued low one.
		d.promoteIfDue()
		s.mu.Lock()
		picked, ok := s.pick(d.maxBurst)
		if !ok {
			s.mu.Unlock()
			select {
			case <-done:
				return
			case <-s.wake:
			}
			continue
		}
		if picked == LaneHigh {
			item := s.hi.pop()
			s.mu.Unlock()
			handle(ctx, d, idx, &d.high, item)
		} else {
			item := s.lo.pop()
			s.mu.Unlock()
			handle(ctx, d, idx, &d.low, item)
		}
	}
}

// handle runs one attempt of item, taken from lane in shard idx, and
// settles it.
func handle[H, L, T comparable](ctx context.Context, d *Dispatcher[H, L], idx int, lane *dispatcherLane[H, L, T], item T) {
	lane.m.depth.Dec()
	var start time.Time
	if lane.m.timed {
		start = d.clock.Now()
	}
	// One deferred call, and a flag rather than a goroutine per call, tells
	// a return from a panic and from a runtime.Goexit: deferred calls run in
	// both, recover returns nil only in the second, and debug.Stack there
	// shows the handler's frames. A panic is recovered, so handle returns
	// normally; a Goexit goes on, and work replaces this goroutine.
	returned := false
	defer func() {
		if returned {
			return
		}
		var err error
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		} else {
			err = ErrGoexit
			d.log.Error(err, "Handler called runtime.Goexit", "lane", lane.id, "item", item,
				"stack", string(debug.Stack()))
		}
		settle(ctx, d, idx, lane, item, start, err)
	}()
	err := lane.handle(ctx, item)
	returned = true
	settle(ctx, d, idx, lane, item, start, err)
}

// settle records the end of an attempt of item that returned err: it frees
// the item, requeues it, schedules its retry or drops it.
func settle[H, L, T comparable](ctx context.Context, d *Dispatcher[H, L], idx int, lane *dispatcherLane[H, L, T], item T, start time.Time, err error) {
	// end is read before anything else is reported, so a retry's due time
	// never depends on when the metrics or the log were called: a clock
	// step made after the retries counter moved is seen by the retry.
	var end time.Time
	if lane.m.timed || err != nil {
		end = d.clock.Now()
	}
	if lane.m.timed {
		lane.m.duration.Observe(end.Sub(start).Seconds())
	}

	s := d.shards[idx]
	s.mu.Lock()
	var gen uint64
	if err != nil {
		s.gen++
		gen = s.gen
	}
	// A handler failing once ctx is done most likely failed because of it:
	// that is the shutdown, not a failure to count, retry or report.
	stopping := err != nil && ctx.Err() != nil
	out, attempts := lane.of(s).done(item, err != nil, stopping, d.retry, gen)
	s.mu.Unlock()

	if pe, ok := err.(*PanicError); ok {
		d.log.Error(pe, "Handler panicked", "lane", lane.id, "item", item, "stack", string(pe.Stack))
	}
	switch out {
	case outcomeRequeue:
		lane.m.depth.Inc()
		// No signal needed: this worker looks at its lanes next.
		if err != nil {
			d.log.V(2).Info("Handler failed; not retried, the item was added again meanwhile and is queued",
				"lane", lane.id, "item", item, "err", err)
		}
	case outcomeStopped:
		lane.m.depth.Inc()
		d.log.V(2).Info("Handler failed while the dispatcher was stopping; the item will be dropped",
			"lane", lane.id, "item", item, "err", err)
	case outcomeRetry:
		lane.m.retries.Inc()
		lane.m.backoff.Inc()
		wait := d.retry.backoff(attempts)
		d.log.V(2).Info("Handler failed, will retry", "lane", lane.id, "item", item,
			"failedAttempts", attempts, "retryIn", wait, "err", err)
		scheduleRetry(d, lane, retryEntry[T]{due: end.Add(wait), gen: gen, shard: idx, item: item})
	case outcomeDrop:
		lane.m.failed()
		err = fmt.Errorf("sharding: %s item dropped after %d failed attempts: %w", lane.id, attempts, err)
		d.log.Error(err, "Dropping item", "lane", lane.id, "item", item)
		d.reportDrop(lane.drop(item, attempts, err))
	}
}

// reportDrop calls the OnDrop hook, if any, recovering a panic.
func (d *Dispatcher[H, L]) reportDrop(drop Drop[H, L]) {
	if d.onDrop == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			d.log.Error(&PanicError{Value: r}, "OnDrop hook panicked", "stack", string(debug.Stack()))
		}
	}()
	d.onDrop(drop)
}

// validItem reports whether item can key the dispatcher's maps: it is equal
// to itself. Comparing an interface that holds an uncomparable value panics;
// that panic is the answer "no", recovered here before any lock is taken.
func validItem[T comparable](item T) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return item == item
}
