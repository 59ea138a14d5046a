package workqueue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/taintkit/taintkit/internal/sched"
)

// Config configures a Queue. Every field is optional.
type Config[T comparable] struct {
	// Name names the queue's metrics. The queue has metrics only with both
	// a Name and a MetricsProvider.
	Name string
	// MetricsProvider makes the queue's metrics, those of client-go's
	// queue (see the package's Metrics). Nil means none: the provider that
	// client-go's workqueue.SetProvider sets, and controller-runtime sets
	// for its own queues, is not readable from another package.
	MetricsProvider workqueue.MetricsProvider
	// RateLimiter says how long AddRateLimited waits. Nil means the default
	// of the queue the constructor stands in for: client-go's
	// DefaultTypedControllerRateLimiter for NewRateLimiting, a per-item
	// exponential backoff from 5 ms to 1000 s for NewPriority.
	RateLimiter workqueue.TypedRateLimiter[T]
	// Clock is the queue's clock. Nil means clock.RealClock{}.
	Clock clock.Clock
}

// Queue is a work queue for reconcile loops: client-go's rate-limiting
// queue and controller-runtime's priority queue, with two more operations,
// [Queue.Schedule] and [Queue.Cancel]. It is safe for concurrent use by
// multiple goroutines. The zero value is not usable: call [NewRateLimiting]
// or [NewPriority].
type Queue[T comparable] struct {
	priorityMode bool // made by NewPriority: controller-runtime's shutdown and Len
	clock        clock.Clock
	limiter      workqueue.TypedRateLimiter[T]
	m            metrics[T]

	mu         sync.Mutex
	nonEmpty   sync.Cond // Get waits on it for a ready item
	waiters    int       // goroutines waiting on nonEmpty
	s          store[T]
	alarm      sched.Alarm   // the queue's one timer
	processing int           // items handed out and not Done
	down       bool          // ShutDown or ShutDownWithDrain was called
	drain      bool          // ShutDownWithDrain waits, until ShutDown
	drained    chan struct{} // closed when no item is processed, or ShutDown is called
	stop       chan struct{} // closed by ShutDown: the timer goroutine exits
	stopped    chan struct{} // closed by the timer goroutine as it exits
}

var _ workqueue.TypedRateLimitingInterface[string] = (*Queue[string])(nil)

// AddOpts says how AddWithOpts adds, as controller-runtime's
// AddOpts does (package priority converts one to the other).
type AddOpts struct {
	After       time.Duration // ready after it (0: now)
	RateLimited bool          // ready after the rate limiter's delay, if shorter than After
	Priority    *int          // higher first; nil is 0
}

// NewRateLimiting returns a queue that keeps the behaviour of client-go's
// rate-limiting queue (workqueue.NewTypedRateLimitingQueueWithConfig) where
// the two interfaces' queues differ:
//   - after ShutDown, Get hands out the items still ready until there are
//     none, then reports shutdown;
//   - ShutDownWithDrain waits until every item handed out is Done, and
//     ShutDown may be called again (it ends that wait);
//   - Len counts the ready items that Get can hand out now.
func NewRateLimiting[T comparable](cfg Config[T]) *Queue[T] {
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[T]()
	}
	return newQueue(cfg, false)
}

// NewPriority returns a queue that keeps the behaviour of
// controller-runtime's priorityqueue.New where the two interfaces' queues
// differ:
//   - after ShutDown, Get reports shutdown at once, and the queue drops
//     every item;
//   - ShutDownWithDrain is ShutDown, and a second call of either panics;
//   - Len also counts the ready items that are being processed.
//
// A controller-runtime controller takes it through controller.Options'
// NewQueue.
func NewPriority[T comparable](cfg Config[T]) *Queue[T] {
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second)
	}
	return newQueue(cfg, true)
}

func newQueue[T comparable](cfg Config[T], priorityMode bool) *Queue[T] {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	q := &Queue[T]{
		priorityMode: priorityMode,
		clock:        cfg.Clock,
		limiter:      cfg.RateLimiter,
		m:            newMetrics[T](cfg.MetricsProvider, cfg.Name),
		s:            newStore[T](),
		alarm:        sched.NewAlarm(cfg.Clock),
		stop:         make(chan struct{}),
		stopped:      make(chan struct{}),
	}
	q.nonEmpty.L = &q.mu
	go q.timerLoop(q.alarm.C())
	return q
}

// Add makes item ready now, unless it is ready already: a waiting item
// stops waiting. Its priority is 0, or stays the higher one it is queued
// with.
func (q *Queue[T]) Add(item T) { q.AddWithOpts(AddOpts{}, item) }

// AddAfter makes item ready after d, or sooner if it is already to be:
// the earlier time wins, as in client-go's and controller-runtime's queues.
// [Queue.Schedule] also moves a time later.
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	q.AddWithOpts(AddOpts{After: d}, item)
}

// AddRateLimited is AddAfter with the delay the rate limiter gives for item.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddWithOpts(AddOpts{RateLimited: true}, item)
}

// AddWithOpts adds items as controller-runtime's priority queue does: each
// is ready after o.After, or after the rate limiter's delay if
// o.RateLimited and that is shorter, or sooner if it is already to be; its
// priority is o.Priority (nil is 0), or stays the higher one it is queued
// with. A raised priority puts a ready item last among the items of its new
// priority. Adds after ShutDown do nothing.
func (q *Queue[T]) AddWithOpts(o AddOpts, items ...T) {
	// Outside the queue's lock: hashing, the rate limiter (which takes its
	// own) and the clock.
	type add struct {
		after time.Duration
		tag   uint32
	}
	var buf [4]add
	adds := buf[:0]
	for _, item := range items {
		a := add{after: o.After}
		if item == item { // a NaN key could never be found again
			a.tag = q.s.tag(item)
		}
		if o.RateLimited {
			if rl := q.limiter.When(item); a.after == 0 || rl < a.after {
				a.after = rl
			}
		}
		adds = append(adds, a)
	}
	now := sched.MomentOf(q.clock.Now())
	var d delta
	q.mu.Lock()
	if q.down {
		q.mu.Unlock()
		return
	}
	ready := 0
	for i, item := range items {
		if item == item {
			ready += q.addLocked(item, adds[i].tag, adds[i].after, o.Priority, now, &d)
		}
	}
	q.wakeLocked(ready)
	q.rearmLocked(&d)
	q.mu.Unlock()
	q.m.apply(&d)
}

// addLocked adds one item and returns 1 if it made it ready to hand out.
func (q *Queue[T]) addLocked(item T, tag uint32, after time.Duration, priority *int, now sched.Moment, d *delta) int {
	s := &q.s
	i, pos := s.find(item, tag)
	prio := 0
	if priority != nil {
		prio = *priority
	}
	if i < 0 {
		i = s.insert(item, pos, tag)
	}
	e := s.at(i)
	switch {
	case e.queued == queuedNone:
		s.setPriority(e, prio) // a new item, or a new request for one being processed
	case prio > s.priority(e):
		s.raise(i, prio)
	}
	if after <= 0 {
		if e.queued == queuedReady {
			return 0
		}
		d.readied()
		return s.makeReady(i, now)
	}
	d.retries++
	if at := now.Add(after); e.queued == queuedNone || e.queued == queuedWaiting && at.Before(e.at) {
		s.makeWaiting(i, at)
	}
	return 0
}

// Schedule makes item ready at at, earlier or later than the time it is
// waiting for: unlike AddAfter, where the earlier time wins, a later at
// postpones it, and a ready item that is not being processed waits again
// until at. An at not after the clock's now makes item ready now, or leaves
// it ready. Item keeps its priority: the one it is queued with, or, while it
// is being processed, the one it was handed out with; a new item's is 0.
// While item is being processed it waits for Done as after any add.
//
// The earlier-wins rule keeps every add's request: no add delays another.
// Schedule sets the time whoever asked for the one waiting, so call it from
// the one place that decides when the item is next due (a reconciler that
// reads it from its object, or its event handlers), and keep Add for what
// needs the reconciler now: an Add after Schedule still makes the item ready
// at once. That is safe for a reconciler, which acts on its object as it is
// when it runs: a postponed hand-out loses no change, and the one at the
// new time reads them all. A reconciler that Schedules each time it reads
// its object's time is handed the item once, at that time, where AddAfter
// would hand it out at every earlier time still waiting, for nothing.
func (q *Queue[T]) Schedule(item T, at time.Time) {
	if item != item {
		return
	}
	tag := q.s.tag(item)
	now, due := sched.MomentOf(q.clock.Now()), sched.MomentOf(at)
	var d delta
	q.mu.Lock()
	if q.down {
		q.mu.Unlock()
		return
	}
	s := &q.s
	i, pos := s.find(item, tag)
	if i < 0 {
		i = s.insert(item, pos, tag)
	}
	e := s.at(i)
	ready := 0
	switch {
	case !now.Before(due):
		if e.queued != queuedReady {
			d.readied()
			ready = s.makeReady(i, now)
		}
	case e.queued == queuedWaiting && e.at == due:
	default:
		if e.queued == queuedReady {
			d.depth--
		}
		d.retries++
		s.makeWaiting(i, due)
	}
	q.wakeLocked(ready)
	q.rearmLocked(&d)
	q.mu.Unlock()
	q.m.apply(&d)
}

// Cancel takes back item, waiting or ready, and reports whether it did: it
// is not handed out for any add made before Cancel, and it is handed out
// again only if added again. An item being processed is not interrupted:
// Cancel takes back only what would have followed its Done.
//
// Neither client-go's nor controller-runtime's queue takes an item back: an
// add is always honoured. Cancel drops every add waiting, whoever made it,
// so call it where nothing is left to do for the item (its object is gone,
// or no longer has a time): that is safe for a reconciler, which would
// receive the item once more and find nothing to do, and an event after
// Cancel adds the item again.
func (q *Queue[T]) Cancel(item T) bool {
	if item != item {
		return false
	}
	tag := q.s.tag(item)
	var d delta
	q.mu.Lock()
	s := &q.s
	i, pos := s.find(item, tag)
	if i < 0 || s.at(i).queued == queuedNone {
		q.mu.Unlock()
		return false
	}
	e := s.at(i)
	if e.queued == queuedReady {
		d.depth--
	}
	s.unqueue(i)
	if !e.processing {
		s.release(i, pos)
		s.shrink()
	}
	q.rearmLocked(&d)
	q.mu.Unlock()
	q.m.apply(&d)
	return true
}

// Due returns when item is to be handed out, if it is waiting or ready: a
// waiting item's time (as Schedule or an add set it), or when a ready one
// became ready. An item being processed with nothing to follow its Done,
// or not in the queue, has none.
func (q *Queue[T]) Due(item T) (time.Time, bool) {
	if item != item {
		return time.Time{}, false
	}
	tag := q.s.tag(item)
	q.mu.Lock()
	defer q.mu.Unlock()
	i, _ := q.s.find(item, tag)
	if i < 0 || q.s.at(i).queued == queuedNone {
		return time.Time{}, false
	}
	return q.s.at(i).at.Time(time.Local), true
}

// Get waits for a ready item and hands it out, as GetWithPriority.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority waits until an item is ready and hands it out with its
// priority: the highest priority first, and within a priority the item
// that became ready first (an item added while it was being processed
// counts from that add). The caller must call Done with it. An item is
// never handed out again before its Done. It reports shutdown once the
// queue is shut down, as the constructor says.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	var d delta
	q.mu.Lock()
	for {
		if q.down && q.priorityMode {
			break
		}
		i, ok := q.s.take()
		if !ok && len(q.s.heap) > 0 && !q.down {
			// Due items the timer goroutine has not moved yet.
			q.pumpLocked(&d)
			i, ok = q.s.take()
		}
		if ok {
			e := q.s.at(i)
			e.queued, e.processing = queuedNone, true
			q.s.ready--
			q.processing++
			var now sched.Moment
			if q.m.on {
				now = sched.MomentOf(q.clock.Now())
			}
			q.m.handedOut(&d, e, now)
			if q.m.on && q.processing == 1 {
				q.rearmLocked(&d) // for the unfinished-work metrics
			}
			item, priority = e.key, q.s.priority(e)
			q.mu.Unlock()
			q.m.apply(&d)
			return item, priority, false
		}
		if q.down {
			break
		}
		q.waiters++
		q.nonEmpty.Wait()
		q.waiters--
	}
	q.mu.Unlock()
	q.m.apply(&d)
	var zero T
	return zero, 0, true
}

// Done marks item as processed. If it was added while it was processed, it
// is ready, or waits for its time, from now on. Done of an item not handed
// out does nothing.
func (q *Queue[T]) Done(item T) {
	if item != item {
		return
	}
	tag := q.s.tag(item)
	var d delta
	q.mu.Lock()
	s := &q.s
	i, pos := s.find(item, tag)
	if i < 0 || !s.at(i).processing {
		q.mu.Unlock()
		return
	}
	e := s.at(i)
	e.processing = false
	q.processing--
	if q.m.on {
		q.m.done(&d, item, sched.MomentOf(q.clock.Now()))
	}
	switch e.queued {
	case queuedNone:
		s.release(i, pos)
		s.shrink()
	case queuedReady:
		s.held--
		s.enqueue(i)
		q.wakeLocked(1)
	}
	if q.processing == 0 {
		q.notifyDrainedLocked()
	}
	q.mu.Unlock()
	q.m.apply(&d)
}

// Forget tells the rate limiter that item is done with retries.
func (q *Queue[T]) Forget(item T) { q.limiter.Forget(item) }

// NumRequeues returns the rate limiter's count of item's retries.
func (q *Queue[T]) NumRequeues(item T) int { return q.limiter.NumRequeues(item) }

// Len returns the number of ready items, as the constructor says. Items
// waiting for their time are not counted.
func (q *Queue[T]) Len() int {
	var d delta
	q.mu.Lock()
	if len(q.s.heap) > 0 && !q.down {
		q.pumpLocked(&d)
	}
	n := q.s.ready - q.s.held
	if q.priorityMode {
		n = q.s.ready
	}
	q.mu.Unlock()
	q.m.apply(&d)
	return n
}

// ShutDown shuts the queue down: adds do nothing from now on, waiting items
// are dropped, Get reports shutdown as the constructor says, and the queue's
// timer goroutine has exited when ShutDown returns.
func (q *Queue[T]) ShutDown() {
	var d delta
	q.mu.Lock()
	q.shutDownLocked(&d)
	q.drain = false // ends ShutDownWithDrain's wait
	q.notifyDrainedLocked()
	q.mu.Unlock()
	q.m.apply(&d)
	<-q.stopped
}

// ShutDownWithDrain shuts the queue down as ShutDown and, for a queue of
// NewRateLimiting, waits until every item handed out is Done, or ShutDown
// is called.
func (q *Queue[T]) ShutDownWithDrain() {
	var d delta
	q.mu.Lock()
	q.shutDownLocked(&d)
	q.drain = !q.priorityMode
	for q.drain && q.processing > 0 {
		if q.drained == nil {
			q.drained = make(chan struct{})
		}
		ch := q.drained
		q.mu.Unlock()
		<-ch
		q.mu.Lock()
	}
	q.mu.Unlock()
	q.m.apply(&d)
	<-q.stopped
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.down
}

// shutDownLocked shuts the queue down, once; a queue of NewPriority panics
// the second time, as controller-runtime's does.
func (q *Queue[T]) shutDownLocked(d *delta) {
	if q.down {
		if q.priorityMode {
			q.mu.Unlock()
			panic("workqueue: ShutDown of a queue already shut down (a queue of NewPriority panics, as controller-runtime's priority queue does)")
		}
		return
	}
	q.down = true
	d.depth -= q.s.dropAll(q.priorityMode)
	q.alarm.Disarm()
	close(q.stop)
	q.nonEmpty.Broadcast()
}

// notifyDrainedLocked wakes ShutDownWithDrain's waits.
func (q *Queue[T]) notifyDrainedLocked() {
	if q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
}

// wakeLocked wakes a Get for each of n items made ready.
func (q *Queue[T]) wakeLocked(n int) {
	for range min(n, q.waiters) {
		q.nonEmpty.Signal()
	}
}
