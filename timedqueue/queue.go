package timedqueue

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// WorkFunc is the work for key; ctx ends at Shutdown or the attempt timeout.
// A nil error ends the schedule; an error fails the attempt.
type WorkFunc[K comparable] func(ctx context.Context, key K) error

// TimedWorker is a snapshot of one schedule, safe to keep; its times are as
// the caller gave them, without a monotonic reading.
type TimedWorker[K comparable] struct {
	Key         K
	CreatedAt   time.Time // as given to AddWork or UpdateWork, for the caller
	FireAt      time.Time // as given; retries never change it
	Attempts    int       // failed attempts of this schedule so far
	NextAttempt time.Time // FireAt, or the retry time after a failure (if Running: this attempt's)
	Running     bool      // an attempt is in flight
}

// ErrShutdown is the Cause of a work ctx cancelled by Shutdown.
var ErrShutdown = errors.New("timedqueue: queue shut down")

// TimedWorkerQueue runs a [WorkFunc] for scheduled keys. It is safe for
// concurrent use; the zero value is not usable: call [New].
type TimedWorkerQueue[K comparable] struct {
	work    WorkFunc[K]
	clock   clock.Clock
	max     int
	retry   RetryPolicy
	timeout time.Duration
	log     logr.Logger
	hooks   atomic.Pointer[hooks[K]] // replaced whole by the Set*Hook methods
	hooksMu sync.Mutex               // serialises those replacements
	turn    turns                    // the admit func's turns
	m       metrics
	// checkKeys: K holds interfaces, so a key may hold a value that is not
	// comparable (a slice, a map, a func); such a key would make the index's
	// hash (and the withdrawn map) panic. Every method refuses it before
	// taking the lock.
	checkKeys bool
	realClock bool // clock is k8s.io/utils/clock's RealClock: see pumpLocked

	baseCtx    context.Context // parent of every work ctx; cancelled by Shutdown
	cancelBase context.CancelCauseFunc
	timerC     <-chan time.Time
	stop       chan struct{} // closed by Shutdown: the timer goroutine exits
	idle       chan struct{} // a token: the timer was stopped, the timer goroutine may exit

	mu          sync.Mutex
	s           *store[K]
	withdrawn   map[K]struct{} // keys with a withdrawn attempt in flight
	active      int            // attempts in flight, withdrawn included; = busy worker goroutines
	tickets     uint64         // admit tickets handed out so far (see turns)
	timer       clock.Timer    // the queue's only timer
	armedAt     int64          // Unix ns the timer is armed for; math.MinInt64 if saturated; never if stopped
	armedFor    instant        // the time the timer is armed for, at full precision
	timed       []*attempt[K]  // in-flight attempts with a deadline
	minDeadline instant        // min deadline over timed, or neverInstant
	closed      bool
	inside      int           // running attempts whose work ctx is in Shutdown (see workCtx)
	ctxs        []workCtx[K]  // the rest of the chunk newWorkCtxLocked takes work ctxs from
	timerOn     bool          // the timer goroutine runs; true whenever armedAt != never
	hooking     int           // workers in a hook: they hold a slot, Shutdown does not wait for them
	changed     chan struct{} // after Shutdown: closed and replaced when a Shutdown wait condition may have changed
}

// New returns a queue running work, or an error naming the bad value.
func New[K comparable](work WorkFunc[K], opts ...Option) (*TimedWorkerQueue[K], error) {
	if work == nil {
		return nil, errors.New("timedqueue: work func must not be nil")
	}
	o, hooks, err := buildOptions[K](opts)
	if err != nil {
		return nil, err
	}
	q := &TimedWorkerQueue[K]{
		work:        work,
		clock:       o.clock,
		max:         o.maxConcurrency,
		retry:       o.retry,
		timeout:     o.attemptTimeout,
		log:         o.logger,
		m:           newMetrics(o.metrics, o.name),
		stop:        make(chan struct{}),
		idle:        make(chan struct{}, 1),
		s:           newStore[K](),
		withdrawn:   make(map[K]struct{}),
		armedAt:     never,
		minDeadline: neverInstant,
		changed:     make(chan struct{}),
		checkKeys:   holdsInterface(reflect.TypeFor[K]()),
		realClock:   isRealClock(o.clock),
	}
	q.hooks.Store(&hooks)
	q.turn.cond.L = &q.turn.mu
	q.turn.next = 1
	q.baseCtx, q.cancelBase = context.WithCancelCause(context.Background())
	// One timer for the queue's whole life, created stopped. It is re-armed
	// with Stop, a drain and Reset, never with Reset alone: a FakeClock does not
	// drain on Reset, and a stale value would make a later Step block.
	q.timer = q.clock.NewTimer(time.Hour)
	q.timer.Stop()
	q.timerC = q.timer.C()
	return q, nil
}

// isRealClock reports whether c is k8s.io/utils/clock's RealClock, which no
// one steps.
func isRealClock(c clock.Clock) bool {
	switch c.(type) {
	case clock.RealClock, *clock.RealClock:
		return true
	}
	return false
}

// holdsInterface reports whether values of type t may hold an interface value,
// whose dynamic value may not be comparable.
func holdsInterface(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Array:
		return holdsInterface(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsInterface(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// badKey reports whether key cannot be used: it holds a value that is not
// comparable, or it is not equal to itself (a NaN). The first check costs
// nothing unless K holds interfaces; the second is one comparison.
func (q *TimedWorkerQueue[K]) badKey(key K) bool {
	if q.checkKeys && !comparableKey(key) {
		return true // checked first: != panics on an uncomparable value
	}
	// A key not equal to itself (a NaN, or a value holding one) could be
	// added but never found again: never cancelled, never released.
	return key != key
}

// comparableKey reports whether key's value is comparable. It is kept out of
// badKey so that taking the address of its own copy of key moves only that
// copy to the heap, and only when K holds interfaces.
//
//go:noinline
func comparableKey[K comparable](key K) bool {
	return reflect.ValueOf(&key).Elem().Comparable()
}

// AddWork schedules the work for key at fireAt and reports whether it did: not
// if key has a live schedule (UpdateWork moves one), after Shutdown, or for a
// key not equal to itself (a NaN). A new schedule after a withdrawn attempt
// also waits for it to return. createdAt is kept for the caller in
// [TimedWorker]; a zero createdAt or fireAt means the clock's now.
func (q *TimedWorkerQueue[K]) AddWork(key K, createdAt, fireAt time.Time) bool {
	if q.badKey(key) {
		return false
	}
	createdAt, fireAt = q.orNow(createdAt, fireAt)
	var d delta
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	i, pos, tag := q.s.idx.find(&q.s.slab, key)
	if i >= 0 {
		q.mu.Unlock()
		return false
	}
	q.scheduleLocked(key, pos, tag, createdAt, fireAt, &d)
	q.pumpLocked(&d)
	q.mu.Unlock()
	q.m.apply(d)
	return true
}

// UpdateWork makes fireAt the time of the work for key and reports whether it
// changed anything: it schedules as AddWork, or moves a schedule earlier or
// later, replacing CreatedAt and restarting Attempts. It changes nothing while
// an attempt runs (call again once it ends), if fireAt equals FireAt (a
// backoff goes on), or where AddWork would not schedule.
func (q *TimedWorkerQueue[K]) UpdateWork(key K, createdAt, fireAt time.Time) bool {
	if q.badKey(key) {
		return false
	}
	createdAt, fireAt = q.orNow(createdAt, fireAt)
	var d delta
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	i, pos, tag := q.s.idx.find(&q.s.slab, key)
	if i < 0 {
		q.scheduleLocked(key, pos, tag, createdAt, fireAt, &d)
	} else {
		e := q.s.at(i)
		if e.state == stateRunning {
			q.mu.Unlock()
			return false
		}
		wasFar := saturated(e.next)
		if !q.s.retime(i, createdAt, fireAt) {
			q.mu.Unlock()
			return false
		}
		if wasFar {
			delete(q.s.xnext, i) // Attempts is reset: NextAttempt is FireAt
		}
		if e.attempts > 0 {
			d.backoff-- // no longer backing off
		}
		e.attempts, e.deferred = 0, false
		e.seq = q.s.nextSeq() // a new schedule: ordered after earlier ones with the same time
		e.next = e.fire       // setTimes stored FireAt as unixNano does
		if e.state == stateWaiting {
			// The old node is stale now; push a new one rather than sift the old.
			q.s.unwait(i, wasFar)
			q.s.push(i)
		}
		d.adds++
	}
	q.pumpLocked(&d)
	q.mu.Unlock()
	q.m.apply(d)
	return true
}

// orNow returns createdAt and fireAt with a zero time replaced by the clock's
// now. Zero is taken as "not given": kept as is, a zero FireAt would fall in
// year 1 and report a lateness of two thousand years.
func (q *TimedWorkerQueue[K]) orNow(createdAt, fireAt time.Time) (time.Time, time.Time) {
	if createdAt.IsZero() || fireAt.IsZero() {
		now := q.clock.Now()
		if createdAt.IsZero() {
			createdAt = now
		}
		if fireAt.IsZero() {
			fireAt = now
		}
	}
	return createdAt, fireAt
}

// scheduleLocked creates a schedule for key, which has no live one; pos and
// tag are what the index's find returned for it.
func (q *TimedWorkerQueue[K]) scheduleLocked(key K, pos, tag uint32, createdAt, fireAt time.Time, d *delta) {
	s := q.s
	i := s.alloc()
	e := s.at(i)
	e.key = key
	e.seq = s.nextSeq()
	s.setTimes(i, createdAt, fireAt)
	e.next = e.fire // setTimes stored FireAt as unixNano does
	e.attempts = 0
	s.idx.insertAt(pos, tag, i)
	if _, ok := q.withdrawn[key]; ok {
		e.state = stateBlocked // released into the heap when the withdrawn attempt returns
	} else {
		s.push(i)
	}
	d.adds++
	d.pending++
}

// CancelWork reports whether it removed pending or backing-off work for key,
// which then never starts. A running attempt goes on, withdrawn: CancelWork
// frees the key and returns false.
func (q *TimedWorkerQueue[K]) CancelWork(key K) bool {
	if q.badKey(key) {
		return false
	}
	var d delta
	q.mu.Lock()
	i, pos, _ := q.s.idx.find(&q.s.slab, key)
	if i < 0 {
		q.mu.Unlock()
		return false
	}
	e := q.s.at(i)
	far := saturated(e.next)
	q.s.idx.deleteAt(pos)
	switch e.state {
	case stateRunning:
		// The worker holds (idx, seq); freeing the slot makes its identity check
		// fail, so its end is handled as a withdrawn attempt.
		q.withdrawn[key] = struct{}{}
		q.s.release(i)
		q.s.shrink()
		q.mu.Unlock()
		return false
	case stateWaiting:
		if e.attempts > 0 {
			d.backoff--
		}
		// Lazy deletion: free the slot, which leaves its heap node stale.
		q.s.release(i)
		if q.s.unwait(i, far) {
			q.pumpLocked(&d) // the earliest time may have changed: re-arm the timer
		}
	default: // blocked: not in the heap
		q.s.release(i)
	}
	q.s.shrink()
	d.pending--
	q.mu.Unlock()
	q.m.apply(d)
	return true
}

// GetWorker returns a snapshot of the live schedule for key, if any.
func (q *TimedWorkerQueue[K]) GetWorker(key K) (TimedWorker[K], bool) {
	if q.badKey(key) {
		return TimedWorker[K]{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i, ok := q.s.idx.get(&q.s.slab, key)
	if !ok {
		return TimedWorker[K]{}, false
	}
	return q.snapshotLocked(i), true
}

func (q *TimedWorkerQueue[K]) snapshotLocked(i int32) TimedWorker[K] {
	e := q.s.at(i)
	w := TimedWorker[K]{
		Key:       e.key,
		CreatedAt: q.s.createdAt(i),
		FireAt:    q.s.fireAt(i),
		Attempts:  int(e.attempts),
		Running:   e.state == stateRunning,
	}
	if e.attempts == 0 && !e.deferred {
		w.NextAttempt = w.FireAt
	} else {
		w.NextAttempt = q.s.nextAt(i).time(q.s.fireLocation(i))
	}
	return w
}

// AppendWorkers appends a snapshot of every live schedule to dst, in no
// order, and returns the extended slice. It holds the queue's lock for O(n):
// it is for a debug endpoint or a test, not for a hot path.
func (q *TimedWorkerQueue[K]) AppendWorkers(dst []TimedWorker[K]) []TimedWorker[K] {
	q.mu.Lock()
	defer q.mu.Unlock()
	dst = slices.Grow(dst, q.s.idx.len())
	for i := range int32(q.s.slab.len()) {
		if q.s.at(i).state != stateFree {
			dst = append(dst, q.snapshotLocked(i))
		}
	}
	return dst
}

// Len returns the number of live schedules.
func (q *TimedWorkerQueue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.s.idx.len()
}
