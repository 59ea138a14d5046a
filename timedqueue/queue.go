package timedqueue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/taintkit/taintkit/internal/sched"
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
	options // set by New, then only read
	work    WorkFunc[K]
	m       metrics

	baseCtx    context.Context // parent of every work ctx; cancelled by Shutdown
	cancelBase context.CancelCauseFunc

	mu        sync.Mutex
	s         store[K]
	hooks     hooks[K]
	lastTurn  chan struct{}  // passTurn of the last attempt that began with an admit func
	withdrawn map[K]struct{} // keys with a withdrawn attempt in flight
	active    int            // attempts in flight, withdrawn included: busy worker goroutines
	alarm     alarm          // the queue's one timer (see timer.go)
	deadlines deadlines[K]   // attempts with a timeout
	down      shutdownState
}

// New returns a queue running work, or an error naming the bad value.
func New[K comparable](work WorkFunc[K], opts ...Option) (*TimedWorkerQueue[K], error) {
	if work == nil {
		return nil, errors.New("timedqueue: work func must not be nil")
	}
	o, h, err := buildOptions[K](opts)
	if err != nil {
		return nil, err
	}
	q := &TimedWorkerQueue[K]{
		options:   o,
		work:      work,
		hooks:     h,
		m:         newMetrics(o.metrics, o.name),
		s:         newStore[K](),
		withdrawn: make(map[K]struct{}),
		deadlines: deadlines[K]{timed: make(map[*attempt[K]]struct{}), min: never},
		down:      shutdownState{changed: make(chan struct{})},
	}
	q.lastTurn = make(chan struct{})
	close(q.lastTurn)
	q.baseCtx, q.cancelBase = context.WithCancelCause(context.Background())
	q.alarm = alarm{Alarm: sched.NewAlarm(q.clock), stop: make(chan struct{}), idle: make(chan struct{}, 1)}
	return q, nil
}

// badKey reports whether key holds a value that is not comparable (comparing
// it panics, as hashing it would) or is not equal to itself (a NaN).
func badKey[K comparable](key K) (bad bool) {
	defer func() {
		if recover() != nil {
			bad = true
		}
	}()
	return key != key
}

// AddWork schedules the work for key at fireAt and reports whether it did: not
// if key has a live schedule (UpdateWork moves one), after Shutdown, or for a
// key not equal to itself (a NaN). A new schedule after a withdrawn attempt
// also waits for it to return. createdAt is kept for the caller in
// [TimedWorker]; a zero createdAt or fireAt means the clock's now.
func (q *TimedWorkerQueue[K]) AddWork(key K, createdAt, fireAt time.Time) bool {
	return q.schedule(key, createdAt, fireAt, false)
}

// UpdateWork makes fireAt the time of the work for key and reports whether it
// changed anything: it schedules as AddWork, or moves a schedule earlier or
// later, replacing CreatedAt and restarting Attempts. It changes nothing while
// an attempt runs (call again once it ends), if fireAt equals FireAt (a
// backoff goes on), or where AddWork would not schedule.
func (q *TimedWorkerQueue[K]) UpdateWork(key K, createdAt, fireAt time.Time) bool {
	return q.schedule(key, createdAt, fireAt, true)
}

func (q *TimedWorkerQueue[K]) schedule(key K, createdAt, fireAt time.Time, update bool) bool {
	if badKey(key) {
		return false
	}
	// A zero time means now: kept as is, a zero FireAt would fall in year 1
	// and report a lateness of two thousand years.
	if createdAt.IsZero() || fireAt.IsZero() {
		now := q.clock.Now()
		if createdAt.IsZero() {
			createdAt = now
		}
		if fireAt.IsZero() {
			fireAt = now
		}
	}
	var d delta
	q.mu.Lock()
	ok := q.scheduleLocked(key, createdAt, fireAt, update, &d)
	q.mu.Unlock()
	q.m.apply(d)
	return ok
}

func (q *TimedWorkerQueue[K]) scheduleLocked(key K, createdAt, fireAt time.Time, update bool, d *delta) bool {
	s := &q.s
	i, pos, tag := s.index.find(&s.slab, key)
	switch {
	case q.down.closed:
		return false
	case i < 0:
		i = s.add(key, pos, tag, createdAt, fireAt)
		if _, ok := q.withdrawn[key]; ok {
			s.at(i).state = stateBlocked // pushed when the withdrawn attempt returns
		} else {
			s.push(i)
		}
		d.pending++
	case !update || s.at(i).state == stateRunning || momentOf(fireAt) == s.at(i).fire:
		return false
	default:
		e := s.at(i)
		if e.attempts > 0 {
			d.backoff-- // Attempts is reset: no longer backing off
		}
		s.setTimes(e, createdAt, fireAt) // a new gen: the old node is stale
		if e.state == stateWaiting {
			s.unwait(i)
			s.push(i)
		}
	}
	d.adds++
	q.pumpLocked(d)
	return true
}

// CancelWork reports whether it removed pending or backing-off work for key,
// which then never starts. A running attempt goes on, withdrawn: CancelWork
// frees the key and returns false.
func (q *TimedWorkerQueue[K]) CancelWork(key K) bool {
	if badKey(key) {
		return false
	}
	var d delta
	q.mu.Lock()
	s := &q.s
	i, pos, _ := s.index.find(&s.slab, key)
	if i < 0 {
		q.mu.Unlock()
		return false
	}
	state := s.at(i).state
	if state == stateWaiting && s.at(i).attempts > 0 {
		d.backoff--
	}
	// A running attempt, finding no entry with its gen, ends as withdrawn.
	s.remove(i, pos)
	if state == stateRunning {
		q.withdrawn[key] = struct{}{}
	} else {
		if state == stateWaiting {
			s.unwait(i)
		}
		q.pumpLocked(&d) // the earliest time may have changed
		d.pending--
	}
	s.shrink()
	q.mu.Unlock()
	q.m.apply(d)
	return state != stateRunning
}

// GetWorker returns a snapshot of the live schedule for key, if any.
func (q *TimedWorkerQueue[K]) GetWorker(key K) (TimedWorker[K], bool) {
	if badKey(key) {
		return TimedWorker[K]{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i, _, _ := q.s.index.find(&q.s.slab, key)
	if i < 0 {
		return TimedWorker[K]{}, false
	}
	return q.s.snapshot(q.s.at(i)), true
}

// AppendWorkers appends a snapshot of every live schedule to dst, in no
// order, holding the queue's lock for O(n): it is for debugging and tests.
func (q *TimedWorkerQueue[K]) AppendWorkers(dst []TimedWorker[K]) []TimedWorker[K] {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range int32(q.s.slab.Len()) {
		if e := q.s.at(i); e.state != stateFree {
			dst = append(dst, q.s.snapshot(e))
		}
	}
	return dst
}

// Len returns the number of live schedules.
func (q *TimedWorkerQueue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.s.index.Len()
}
