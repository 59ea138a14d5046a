package manager

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// budgets is the eviction budget: a token bucket per namespace, or one for
// all, on the manager's clock. It is the eviction queue's admit func
// (timedqueue.SetAdmitFunc): every eviction attempt asks it for a token before
// it runs, and one it refuses waits in the queue, holding no eviction slot,
// until the time it is told, then asks again.
//
// The promise: no more evictions start than the bucket allows in any window
// (burst + rate × length), tokens go in deadline order within a bucket, none
// is lost, none starves, and nothing waits that Shutdown cannot drop.
//
// The order is decided when a token is granted, from the line of evictions
// that wait for one (sorted by deadline): an eviction may take a token only if
// every eviction ahead of it in its line is due to ask now, and enough tokens
// are left for them all; otherwise it joins the line at its deadline and is
// told to come back once those ahead of it have been told to, and when, at
// the bucket's rate, enough tokens will have come for them and itself. A
// late-decided earlier deadline thus goes ahead of later ones, which find,
// when they come back, that they must wait longer. The queue asks in the order
// attempts start, one call at a time, which for evictions due together is
// deadline order: evictions that start together take the burst in deadline
// order too, whatever order their workers run in.
//
// Tokens are taken from the bucket only when granted, at the instant the
// eviction starts: the bound holds however late an eviction comes for its
// token (a slow delete holding every slot), and an eviction that moves (its
// deadline rescheduled) keeps nothing. A granted token is not given back if
// the eviction then finds nothing to do (the pod gone meanwhile): that costs
// throughput, never the bound.
//
// A place in a line is only an estimate of order, and nothing depends on its
// holder coming back: one that does not (its eviction cancelled without a
// release, or moved) is dropped when it reaches the front of its line and
// its time has passed, once the queue says its schedule no longer waits for
// it. Until then it delays those behind it by at most one token each.
//
// Memory: an entry per waiting eviction, and a bucket per namespace with
// waiting evictions or a bucket not yet full again; an idle, full bucket is
// dropped, and the map of waiting evictions is rebuilt when it shrinks to a
// quarter of its peak.
type budgets struct {
	limit rate.Limit
	burst int
	perNS bool
	// waits reports whether the eviction of key still waits in the queue for
	// the time wake it was given: its schedule exists, is not running, and
	// its next attempt is at wake.
	waits func(key types.NamespacedName, wake time.Time) bool

	mu         sync.Mutex
	buckets    map[string]*bucket
	waiting    map[types.NamespacedName]*waiter
	waitingMax int // for rebuildIfShrunk: a mass wait's map must not stay
}

type bucket struct {
	lim  *rate.Limiter
	line []*waiter // sorted by (deadline, namespace, name)
	// latest is the latest wake in line, if !stale; a waiter with that wake
	// left since it was computed if stale.
	latest time.Time
	stale  bool
}

// waiter is an eviction waiting for a token.
type waiter struct {
	key      types.NamespacedName
	deadline time.Time
	wake     time.Time // when it was told to come back
	since    time.Time // when it first waited
	b        *bucket
}

// newBudgets returns the budgets of r evictions per second with bursts of
// burst, or nil (no limit) if r is 0.
func newBudgets(r float64, burst int, perNamespace bool, waits func(types.NamespacedName, time.Time) bool) *budgets {
	if r == 0 {
		return nil
	}
	return &budgets{
		limit:   rate.Limit(r),
		burst:   max(burst, 1),
		perNS:   perNamespace,
		waits:   waits,
		buckets: make(map[string]*bucket),
		waiting: make(map[types.NamespacedName]*waiter),
	}
}

// grant is the outcome of asking for a token.
type grant struct {
	ok     bool
	waited time.Duration // with ok: since the eviction first waited, 0 if it did not
	until  time.Time     // without ok: when to ask again
	first  bool          // without ok: the eviction's first wait
}

// take asks for a token for the eviction of key, due at deadline. A nil
// *budgets always grants.
func (b *budgets) take(key types.NamespacedName, deadline, now time.Time) grant {
	if b == nil {
		return grant{ok: true}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := b.bucketLocked(key.Namespace)
	since, first := now, true
	if w := b.waiting[key]; w != nil {
		since, first = w.since, false
		b.leaveLocked(w)
	}
	b.dropGoneLocked(bk, now)
	me := &waiter{key: key, deadline: deadline, since: since, b: bk}
	ahead, _ := slices.BinarySearchFunc(bk.line, me, compareWaiters)
	tokens := bk.lim.TokensAt(now)
	latest := bk.latestAhead(ahead)
	if !latest.After(now) && tokens >= float64(ahead+1) && bk.lim.AllowN(now, 1) {
		b.tidyLocked(bk, key.Namespace, now)
		if first {
			return grant{ok: true}
		}
		return grant{ok: true, waited: now.Sub(since)}
	}
	// Come back when the tokens for those ahead and for this one will have
	// come, rounded up: never before.
	need := (float64(ahead+1) - tokens) / float64(b.limit)
	me.wake = now.Add(time.Duration(math.Ceil(need * float64(time.Second))))
	if !me.wake.After(latest) {
		me.wake = latest.Add(time.Nanosecond) // after those ahead, who may need every token
	}
	if !me.wake.After(now) {
		me.wake = now.Add(time.Nanosecond)
	}
	bk.line = slices.Insert(bk.line, ahead, me)
	if !bk.stale && me.wake.After(bk.latest) {
		bk.latest = me.wake
	}
	b.waiting[key] = me
	b.waitingMax = max(b.waitingMax, len(b.waiting))
	return grant{until: me.wake, first: first}
}

// latestAhead returns the latest wake of the first n waiters in line. The
// common case, a newcomer at the back, is O(1) but after a departure of the
// latest waiter; a late-decided earlier deadline costs O(n).
func (bk *bucket) latestAhead(n int) time.Time {
	if n < len(bk.line) {
		var latest time.Time
		for _, w := range bk.line[:n] {
			if w.wake.After(latest) {
				latest = w.wake
			}
		}
		return latest
	}
	if bk.stale {
		bk.latest, bk.stale = time.Time{}, false
		for _, w := range bk.line {
			if w.wake.After(bk.latest) {
				bk.latest = w.wake
			}
		}
	}
	return bk.latest
}

func compareWaiters(a, b *waiter) int {
	return cmp.Or(a.deadline.Compare(b.deadline), cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
}

// dropGoneLocked drops the waiters at the front of bk's line whose time has
// passed and whose eviction no longer waits for it.
func (b *budgets) dropGoneLocked(bk *bucket, now time.Time) {
	for len(bk.line) > 0 {
		w := bk.line[0]
		if !w.wake.Before(now) || b.waits(w.key, w.wake) {
			return
		}
		b.leaveLocked(w)
	}
}

// release forgets the eviction of key if it waits for a token (it was
// cancelled, or no longer has to go), and reports whether it did.
func (b *budgets) release(key types.NamespacedName, now time.Time) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.waiting[key]
	if w == nil {
		return false
	}
	b.leaveLocked(w)
	b.tidyLocked(w.b, key.Namespace, now)
	return true
}

// holds reports whether the eviction of key waits for a token. A nil
// *budgets holds none.
func (b *budgets) holds(key types.NamespacedName) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting[key] != nil
}

func (b *budgets) bucketLocked(ns string) *bucket {
	if !b.perNS {
		ns = ""
	}
	bk := b.buckets[ns]
	if bk == nil {
		bk = &bucket{lim: rate.NewLimiter(b.limit, b.burst)}
		b.buckets[ns] = bk
	}
	return bk
}

// leaveLocked takes w out of its line and forgets it.
func (b *budgets) leaveLocked(w *waiter) {
	delete(b.waiting, w.key)
	b.waiting = rebuildIfShrunk(b.waiting, &b.waitingMax)
	line := w.b.line
	i, found := slices.BinarySearchFunc(line, w, compareWaiters)
	if !found || line[i] != w {
		return
	}
	if i == 0 {
		// Waiters mostly leave from the front: reslice, in O(1).
		line[0] = nil
		w.b.line = line[1:]
	} else {
		w.b.line = slices.Delete(line, i, i+1)
	}
	if w.wake.Equal(w.b.latest) {
		w.b.stale = true
	}
	if len(w.b.line) == 0 {
		w.b.line = nil // give the backing array back after a mass wait
		w.b.latest, w.b.stale = time.Time{}, false
	}
}

// tidyLocked drops bk if it is idle and full: a new bucket would be the same.
func (b *budgets) tidyLocked(bk *bucket, ns string, now time.Time) {
	if !b.perNS {
		return
	}
	if len(bk.line) == 0 && bk.lim.TokensAt(now) >= float64(b.burst) {
		delete(b.buckets, ns)
	}
}
