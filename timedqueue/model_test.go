package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

// The model-based test drives a queue with random AddWork, UpdateWork,
// CancelWork, GetWorker, Len, clock steps and releases of blocked work, and
// checks every result against a reference model. Each operation is made at a
// quiescent point (after synctest.Wait), so the model knows exactly which
// attempts are in flight: the only ones are work funcs blocked on a gate.
//
// Checked: return values and snapshots match the model; an attempt starts only
// for a live, non-running schedule, never before its NextAttempt (so never
// before FireAt), never after a CancelWork that returned true, never while
// another attempt of its key is in flight; at most MaxAttempts attempts and one
// success per schedule; due work never waits while a slot is free; and, at the
// end, every schedule ended exactly once: succeeded, finally failed (reported
// to the hook), cancelled or withdrawn.

const (
	modelMaxAttempts = 3
	modelKeys        = 8
	modelSlots       = 3
)

var modelPolicy = timedqueue.RetryPolicy{MaxAttempts: modelMaxAttempts, InitialBackoff: 300 * time.Millisecond, MaxBackoff: time.Second}

type sched struct {
	id        int
	key       string
	fireAt    time.Time
	createdAt time.Time
	next      time.Time
	attempts  int // failed attempts
	runs      int
	successes int
	end       string // "", "success", "failed", "cancelled", "withdrawn"
}

type modelKey struct {
	live    *sched // the live schedule (pending, backing off or running)
	running *sched // the attempt in flight, live or withdrawn
	gate    chan struct{}
}

type model struct {
	t     *testing.T
	clk   *testingclock.FakeClock
	seed  uint64
	mu    sync.Mutex
	keys  map[string]*modelKey
	all   []*sched
	block bool // blocking outcomes allowed
	errs  []string
	tries map[string]int // attempts started per key, to derive outcomes
	pads  int            // padding schedules now live (see runModel's pad)
}

func (m *model) fail(format string, args ...any) {
	m.errs = append(m.errs, fmt.Sprintf(format, args...))
}

// outcome derives the result of the n-th attempt of key from the seed, so that
// it does not depend on the order in which goroutines run.
func (m *model) outcome(key string, n int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", m.seed, key, n)
	switch v := h.Sum64() % 100; {
	case v < 45:
		return "ok"
	case v < 70:
		return "err"
	case v < 76:
		return "permanent"
	case v < 82:
		return "panic"
	case v < 91:
		return "block-ok"
	default:
		return "block-err"
	}
}

func (m *model) work(ctx context.Context, key string) error {
	m.mu.Lock()
	now := m.clk.Now()
	k := m.keys[key]
	s := k.live
	switch {
	case s == nil:
		m.fail("%s started with no live schedule (after a true CancelWork?)", key)
		m.mu.Unlock()
		return nil
	case k.running != nil:
		m.fail("%s started while another attempt of it is in flight", key)
	case now.Before(s.next) || now.Before(s.fireAt):
		m.fail("%s schedule %d started at %v, before NextAttempt %v / FireAt %v", key, s.id, now.Sub(t0), s.next.Sub(t0), s.fireAt.Sub(t0))
	}
	s.runs++
	if s.runs > modelMaxAttempts {
		m.fail("%s schedule %d: %d attempts", key, s.id, s.runs)
	}
	k.running = s
	m.tries[key]++
	out := m.outcome(key, m.tries[key])
	if !m.block && (out == "block-ok" || out == "block-err") {
		out = out[len("block-"):]
	}
	var gate chan struct{}
	if out == "block-ok" || out == "block-err" {
		gate = make(chan struct{})
		k.gate = gate
	}
	m.mu.Unlock()

	if gate != nil {
		<-gate
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	now = m.clk.Now()
	k.running = nil
	k.gate = nil
	failed := out != "ok" && out != "block-ok"
	if k.live != s { // withdrawn: nothing follows
		if s.end != "withdrawn" {
			m.fail("%s schedule %d not live at its end but not withdrawn (%q)", key, s.id, s.end)
		}
	} else if !failed {
		s.successes++
		s.end = "success"
		k.live = nil
	} else {
		s.attempts++
		if out == "permanent" || s.attempts >= modelMaxAttempts {
			s.end = "failed?" // confirmed by the hook
			k.live = nil
		} else {
			s.next = now.Add(min(modelPolicy.InitialBackoff<<(s.attempts-1), modelPolicy.MaxBackoff))
		}
	}
	switch out {
	case "ok", "block-ok":
		return nil
	case "permanent":
		return timedqueue.Permanent(errors.New("permanent"))
	case "panic":
		panic("model panic")
	default:
		return errors.New("transient")
	}
}

func (m *model) hook(w timedqueue.TimedWorker[string], err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s *sched
	for i := len(m.all) - 1; i >= 0; i-- {
		if m.all[i].key == w.Key && m.all[i].end == "failed?" {
			s = m.all[i]
			break
		}
	}
	if s == nil {
		m.fail("hook for %s: no schedule expected to fail (%v)", w.Key, err)
		return
	}
	s.end = "failed"
	if !w.FireAt.Equal(s.fireAt) || w.Attempts != s.attempts {
		m.fail("hook for %s: got FireAt %v Attempts %d, want %v %d", w.Key, w.FireAt, w.Attempts, s.fireAt, s.attempts)
	}
}

func (m *model) newSched(key string, created, fire time.Time) *sched {
	s := &sched{id: len(m.all), key: key, createdAt: created, fireAt: fire, next: fire}
	m.all = append(m.all, s)
	return s
}

// checkQuiescent compares the queue with the model at a quiescent point.
func (m *model) checkQuiescent(q *timedqueue.TimedWorkerQueue[string]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	busy, live := 0, 0
	for _, k := range m.keys {
		if k.running != nil {
			busy++
		}
	}
	for key, k := range m.keys {
		w, ok := q.GetWorker(key)
		if (k.live != nil) != ok {
			m.fail("GetWorker(%s) ok=%v, model live=%v", key, ok, k.live != nil)
			continue
		}
		if !ok {
			continue
		}
		live++
		s := k.live
		want := timedqueue.TimedWorker[string]{Key: key, CreatedAt: s.createdAt, FireAt: s.fireAt,
			Attempts: s.attempts, NextAttempt: s.next, Running: k.running == s}
		if w != want {
			m.fail("GetWorker(%s) = %+v, want %+v", key, w, want)
		}
		if k.running == nil && !now.Before(s.next) && busy < modelSlots {
			m.fail("%s due since %v but not started with %d/%d slots busy", key, s.next.Sub(t0), busy, modelSlots)
		}
	}
	if n := q.Len(); n != live+m.pads {
		m.fail("Len() = %d, want %d", n, live+m.pads)
	}
	if err := timedqueue.CheckInvariants(q); err != nil {
		m.fail("invariants: %v", err)
	}
}

func TestModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, seed, 2500, modelKeys, t0, false, 0) })
		})
	}
}

// TestModelFarTimes runs the model with times that do not fit in int64 Unix
// nanoseconds (before 1678, after 2262): on a clock in such a year, and with
// some FireAts long past on a clock of today, mixed with ordinary ones.
func TestModelFarTimes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		start    time.Time
		farTimes bool
	}{
		{"clock in 1500", time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"clock in 2500", time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"some FireAt in 1500 or 2300", t0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, 21, 2500, modelKeys, tc.start, tc.farTimes, 0) })
		})
	}
}

// TestModelManyKeys runs the model with more keys than slots by far, so that
// the heap is deep: cancelled and rescheduled schedules leave stale nodes
// below the top as well as at it, and compactions rebuild a heap of dozens.
func TestModelManyKeys(t *testing.T) {
	for _, seed := range []uint64{11, 12, 13} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, seed, 5000, 100, t0, false, 0) })
		})
	}
}

// runModel runs ops random operations on nkeys keys with a clock starting at
// start. With farTimes, a tenth of the times are in 1500 and a twentieth in
// 2300 instead of around now; those left in 2300 are cancelled at the end.
// With pad > 0, every 100 operations it adds pad padding schedules far
// ahead, or cancels them all: the store shrinks, moving the model's entries.
func runModel(t *testing.T, seed uint64, ops, nkeys int, start time.Time, farTimes bool, pad int) {
	clk := testingclock.NewFakeClock(start)
	m := &model{t: t, clk: clk, seed: seed, keys: map[string]*modelKey{}, block: true, tries: map[string]int{}}
	for i := range nkeys {
		m.keys[fmt.Sprint("k", i)] = &modelKey{}
	}
	q, err := timedqueue.New(m.work, timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(modelSlots),
		timedqueue.WithRetry(modelPolicy), timedqueue.WithFailureHook(m.hook), timedqueue.WithLogger(logr.Discard()))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	randTime := func() time.Time { // from 1s ago to 3s ahead, half of them on a 100ms grid (ties)
		if farTimes {
			switch rng.IntN(20) {
			case 0, 1:
				return time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(3)) * time.Second)
			case 2:
				return time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(3)) * time.Second)
			}
		}
		if rng.IntN(2) == 0 {
			return clk.Now().Add(time.Duration(rng.IntN(41)-10) * 100 * time.Millisecond)
		}
		return clk.Now().Add(time.Duration(rng.IntN(4001)-1000) * time.Millisecond)
	}
	steps := []time.Duration{0, 1, time.Millisecond - 1, time.Millisecond, 100*time.Millisecond - 1, 100 * time.Millisecond, 300 * time.Millisecond, time.Second}
	var counts [7]int
	padding := func(add bool) {
		for i := range pad {
			if add {
				require.True(t, q.AddWork(fmt.Sprint("pad", i), t0, start.Add(1000*time.Hour)))
			} else {
				require.True(t, q.CancelWork(fmt.Sprint("pad", i)))
			}
		}
		m.mu.Lock()
		m.pads = map[bool]int{true: pad}[add]
		m.mu.Unlock()
	}
	for op := range ops {
		if pad > 0 && op%100 == 0 {
			padding(m.pads == 0)
		}
		key := fmt.Sprint("k", rng.IntN(nkeys))
		op := rng.IntN(7)
		counts[op]++
		m.mu.Lock()
		k := m.keys[key]
		m.mu.Unlock()
		switch op {
		case 0, 1: // AddWork
			created, fire := randTime(), randTime()
			m.mu.Lock()
			want := k.live == nil
			if want {
				k.live = m.newSched(key, created, fire)
			}
			m.mu.Unlock()
			if got := q.AddWork(key, created, fire); got != want {
				m.fail("AddWork(%s) = %v, want %v", key, got, want)
			}
		case 2: // UpdateWork
			created, fire := randTime(), randTime()
			if rng.IntN(4) == 0 {
				if w, ok := q.GetWorker(key); ok {
					fire = w.FireAt // an equal FireAt: no change
				}
			}
			m.mu.Lock()
			want := true
			switch s := k.live; {
			case s == nil:
				k.live = m.newSched(key, created, fire)
			case k.running == s || s.fireAt.Equal(fire):
				want = false
			default:
				s.end = "cancelled" // replaced: counts as ended without running further
				k.live = m.newSched(key, created, fire)
				k.live.runs = 0
			}
			m.mu.Unlock()
			if got := q.UpdateWork(key, created, fire); got != want {
				m.fail("UpdateWork(%s) = %v, want %v", key, got, want)
			}
		case 3: // CancelWork
			m.mu.Lock()
			want := false
			switch s := k.live; {
			case s == nil:
			case k.running == s:
				s.end = "withdrawn"
				k.live = nil
			default:
				s.end = "cancelled"
				k.live = nil
				want = true
			}
			m.mu.Unlock()
			if got := q.CancelWork(key); got != want {
				m.fail("CancelWork(%s) = %v, want %v", key, got, want)
			}
		case 4, 5: // Step
			clk.Step(steps[rng.IntN(len(steps))])
		case 6: // release a blocked attempt
			m.mu.Lock()
			if k.gate != nil {
				close(k.gate)
				k.gate = nil
			}
			m.mu.Unlock()
		}
		synctest.Wait()
		m.checkQuiescent(q)
		if len(m.errs) > 0 {
			break
		}
	}

	if m.pads > 0 {
		padding(false)
	}
	// Cancel what waits for 2300; the drain below lets only seconds pass.
	m.mu.Lock()
	for key, k := range m.keys {
		if s := k.live; s != nil && s.fireAt.Year() >= 2300 && k.running != s {
			s.end, k.live = "cancelled", nil
			m.mu.Unlock()
			if !q.CancelWork(key) {
				m.fail("CancelWork(%s) of a schedule due in 2300 = false", key)
			}
			m.mu.Lock()
		}
	}
	m.mu.Unlock()
	synctest.Wait()
	m.checkQuiescent(q)

	// Drain: no more blocking; release what is blocked and let time pass.
	m.mu.Lock()
	m.block = false
	m.mu.Unlock()
	for range 100 {
		m.mu.Lock()
		for _, k := range m.keys {
			if k.gate != nil {
				close(k.gate)
				k.gate = nil
			}
		}
		m.mu.Unlock()
		clk.Step(time.Second)
		synctest.Wait()
	}
	m.checkQuiescent(q)
	assert.Equal(t, 0, q.Len())
	require.NoError(t, q.Shutdown(context.Background()))

	m.mu.Lock()
	defer m.mu.Unlock()
	ends := map[string]int{}
	for _, s := range m.all {
		ends[s.end]++
		if s.successes > 1 {
			m.fail("schedule %d of %s succeeded %d times", s.id, s.key, s.successes)
		}
		switch s.end {
		case "success", "failed", "cancelled", "withdrawn":
		default:
			m.fail("schedule %d of %s lost: end %q", s.id, s.key, s.end)
		}
	}
	t.Logf("ops %v, schedules %d, ends %v", counts, len(m.all), ends)
	for _, e := range m.errs[:min(len(m.errs), 20)] {
		t.Error(e)
	}
	assert.Greater(t, ends["success"], 100)
	assert.Greater(t, ends["failed"], 10)
	assert.Greater(t, ends["cancelled"], 100)
	if nkeys == modelKeys {
		assert.Greater(t, ends["withdrawn"], 5)
	}
}

// TestStress has goroutines add, update and cancel overlapping keys and move
// the clock, all at once, and checks invariants rather than exact results: an
// attempt never starts before its NextAttempt, a key never runs concurrently
// with itself, and everything settles with no goroutine left.
func TestStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(t0)
		var (
			mu       sync.Mutex
			inFlight = map[int]bool{}
			errs     []string
			runs     int
		)
		var q *timedqueue.TimedWorkerQueue[int]
		q, err := timedqueue.New(func(ctx context.Context, key int) error {
			now := clk.Now()
			w, ok := q.GetWorker(key)
			mu.Lock()
			runs++
			// A running snapshot is this attempt's: a key has one attempt in flight
			// at most. Otherwise it was withdrawn, maybe re-added, meanwhile.
			if ok && w.Running && (now.Before(w.NextAttempt) || now.Before(w.FireAt)) {
				errs = append(errs, fmt.Sprintf("key %d started at %v before %v", key, now, w.NextAttempt))
			}
			if inFlight[key] {
				errs = append(errs, fmt.Sprintf("key %d runs concurrently with itself", key))
			}
			inFlight[key] = true
			mu.Unlock()
			q.Len() // meets the others on the queue's lock while in flight
			mu.Lock()
			inFlight[key] = false
			mu.Unlock()
			if key%3 == 0 {
				return errors.New("fail")
			}
			return nil
		}, timedqueue.WithClock(clk), timedqueue.WithMaxConcurrency(4), timedqueue.WithLogger(logr.Discard()),
			timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond}))
		require.NoError(t, err)

		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for range 500 {
					key := rng.IntN(20)
					fire := clk.Now().Add(time.Duration(rng.IntN(50)-10) * time.Millisecond)
					switch rng.IntN(13) {
					case 0, 1, 2, 3:
						q.AddWork(key, t0, fire)
					case 4, 5, 6, 7:
						q.UpdateWork(key, t0, fire)
					case 8, 9, 10, 11:
						q.CancelWork(key)
					default:
						clk.Step(time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		for range 20 {
			clk.Step(time.Second)
			synctest.Wait()
		}
		assert.Equal(t, 0, q.Len())
		require.NoError(t, q.Shutdown(context.Background()))
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, errs)
		assert.Greater(t, runs, 10)
	})
}
