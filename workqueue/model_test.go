package workqueue_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/workqueue"
)

// The queue is checked against a reference that a reader can verify by eye:
// a map of items, each with what it is queued for, its time, its priority,
// its turn, and whether it is processed; Get scans them all.

type refItem struct {
	queued     string // "", "waiting" or "ready"
	at         time.Time
	prio       int
	turn       int // when it was last queued, or its priority raised
	processing bool
}

type reference struct {
	now          time.Time
	turns        int
	items        map[string]*refItem
	priorityMode bool
}

func (r *reference) item(key string) *refItem {
	it := r.items[key]
	if it == nil {
		it = &refItem{}
		r.items[key] = it
	}
	return it
}

func (r *reference) queue(it *refItem, queued string, at time.Time) {
	r.turns++
	it.queued, it.at, it.turn = queued, at, r.turns
}

func (r *reference) add(key string, after time.Duration, prio *int) {
	it := r.item(key)
	p := 0
	if prio != nil {
		p = *prio
	}
	switch {
	case it.queued == "":
		it.prio = p
	case p > it.prio:
		it.prio = p
		if it.queued == "ready" {
			r.turns++
			it.turn = r.turns
		}
	}
	switch at := r.now.Add(after); {
	case after <= 0 && it.queued != "ready":
		r.queue(it, "ready", r.now)
	case after > 0 && (it.queued == "" || it.queued == "waiting" && at.Before(it.at)):
		r.queue(it, "waiting", at)
	}
}

func (r *reference) schedule(key string, at time.Time) {
	it := r.item(key)
	switch {
	case !r.now.Before(at):
		if it.queued != "ready" {
			r.queue(it, "ready", r.now)
		}
	case it.queued == "waiting" && it.at.Equal(at):
	default:
		r.queue(it, "waiting", at)
	}
}

func (r *reference) cancel(key string) bool {
	it := r.items[key]
	if it == nil || it.queued == "" {
		return false
	}
	it.queued = ""
	if !it.processing {
		delete(r.items, key)
	}
	return true
}

// next returns the item Get hands out, if any.
func (r *reference) next() (string, bool) {
	best, found := "", false
	for k, it := range r.items {
		if it.queued != "ready" || it.processing {
			continue
		}
		if b := r.items[best]; !found || it.prio > b.prio || it.prio == b.prio && it.turn < b.turn {
			best, found = k, true
		}
	}
	return best, found
}

func (r *reference) get(key string) {
	it := r.items[key]
	it.queued, it.processing = "", true
}

func (r *reference) done(key string) {
	it := r.items[key]
	if it == nil || !it.processing {
		return
	}
	if it.processing = false; it.queued == "" {
		delete(r.items, key)
	}
}

// step moves the clock: the waiting items due are ready from their time
// on, in the order of their times, then of their turns.
func (r *reference) step(d time.Duration) {
	r.now = r.now.Add(d)
	var due []*refItem
	for _, it := range r.items {
		if it.queued == "waiting" && !r.now.Before(it.at) {
			due = append(due, it)
		}
	}
	slices.SortFunc(due, func(a, b *refItem) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.turn - b.turn
	})
	for _, it := range due {
		r.queue(it, "ready", it.at)
	}
}

func (r *reference) len() int {
	n := 0
	for _, it := range r.items {
		if it.queued == "ready" && (!it.processing || r.priorityMode) {
			n++
		}
	}
	return n
}

// An op is one call, decoded from a byte pair so that the fuzz target and
// the random test share it: the first byte picks the call, the second its
// arguments.
type op struct{ kind, arg byte }

var (
	keys       = []string{"a", "b", "c", "d", "e", "f"}
	priorities = []*int{nil, prio(-1), prio(0), prio(1), prio(2)}
)

func (o op) key() string          { return keys[int(o.arg)%len(keys)] }
func (o op) delay() time.Duration { return time.Duration(int(o.arg>>3)%8-2) * time.Second }
func (o op) priority() *int       { return priorities[int(o.arg>>3)%len(priorities)] }

func (o op) String() string {
	switch o.kind % 8 {
	case 0:
		return fmt.Sprintf("Add(%s)", o.key())
	case 1:
		return fmt.Sprintf("AddAfter(%s, %v)", o.key(), o.delay())
	case 2:
		return fmt.Sprintf("AddWithOpts(%s, prio %v, after %v)", o.key(), deref(o.priority()), o.delay()/2)
	case 3:
		return fmt.Sprintf("Schedule(%s, now%+v)", o.key(), o.delay())
	case 4:
		return fmt.Sprintf("Cancel(%s)", o.key())
	case 5:
		return "Get"
	case 6:
		return fmt.Sprintf("Done(%s)", o.key())
	}
	return fmt.Sprintf("Step(%v)", time.Duration(o.arg%5)*time.Second/2)
}

func deref(p *int) any {
	if p == nil {
		return "nil"
	}
	return *p
}

// runOps applies ops to a queue (of NewPriority if priorityMode) and to the reference, comparing
// what they return and the state they report after each.
func runOps(t *testing.T, priorityMode bool, ops []op) {
	synctest.Test(t, func(t *testing.T) {
		newQ := workqueue.NewRateLimiting[string]
		if priorityMode {
			newQ = workqueue.NewPriority[string]
		}
		q, clk := newQueue(t, newQ)
		r := &reference{now: t0, items: map[string]*refItem{}, priorityMode: priorityMode}
		for n, o := range ops {
			where := fmt.Sprintf("op %d, %v", n, o)
			switch o.kind % 8 {
			case 0:
				q.Add(o.key())
				r.add(o.key(), 0, nil)
			case 1:
				q.AddAfter(o.key(), o.delay())
				r.add(o.key(), o.delay(), nil)
			case 2:
				q.AddWithOpts(workqueue.AddOpts{After: o.delay() / 2, Priority: o.priority()}, o.key())
				r.add(o.key(), o.delay()/2, o.priority())
			case 3:
				q.Schedule(o.key(), r.now.Add(o.delay()))
				r.schedule(o.key(), r.now.Add(o.delay()))
			case 4:
				require.Equal(t, r.cancel(o.key()), q.Cancel(o.key()), where)
			case 5:
				want, ok := r.next()
				if !ok {
					continue // Get would wait
				}
				got, p, _ := q.GetWithPriority()
				require.Equal(t, want, got, where)
				require.Equal(t, r.items[want].prio, p, where)
				r.get(want)
			case 6:
				q.Done(o.key())
				r.done(o.key())
			case 7:
				d := time.Duration(o.arg%5) * time.Second / 2
				clk.Step(d)
				r.step(d)
			}
			synctest.Wait()
			require.Equal(t, r.len(), q.Len(), where)
			for _, k := range keys {
				at, ok := q.Due(k)
				it := r.items[k]
				wantOK := it != nil && it.queued != ""
				require.Equal(t, wantOK, ok, "%s: Due(%s)", where, k)
				if ok {
					require.True(t, it.at.Equal(at), "%s: Due(%s) = %v, want %v", where, k, at, it.at)
				}
			}
			require.NoError(t, workqueue.CheckInvariants(q), where)
		}
	})
}

func TestAgainstReference(t *testing.T) {
	for _, mode := range []bool{false, true} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("priorityMode=%v/seed=%d", mode, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				ops := make([]op, 400)
				for i := range ops {
					ops[i] = op{byte(rng.IntN(256)), byte(rng.IntN(256))}
				}
				runOps(t, mode, ops)
			})
		}
	}
}
