package manager

import (
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// budgets is the eviction budget: a token bucket per namespace, or one for
// all, on the manager's clock. A due eviction takes a token before it writes
// anything; without one it waits in the eviction queue (timedqueue.RetryAt),
// holding no eviction slot, until the time of the token reserved for it.
//
// Tokens go in deadline order within a bucket. Evictions start in the queue's
// NextAttempt order, which is deadline order, but attempts that start
// together run concurrently and would reach the bucket in any order: so they
// ask in the order they started (timedqueue.AttemptNumber), each waiting
// for the attempts started before it to ask or to end (a short wait: the
// lister reads and the decision, no API call). An eviction that finds no token
// reserves the next one (rate.Limiter.ReserveN with explicit times);
// reservations are kept as slots sorted by time. A new reservation with an
// earlier deadline than waiting ones (a pod decided late, whose deadline has
// long passed) moves ahead of every later-deadline one whose slot has not come
// yet, taking its slot (the times stay where they are; the holders change
// places). A holder moved later finds, when it wakes at its old time, that its
// slot is later and waits again. None is lost: a slot is removed only when its holder takes it
// or is released (its eviction ended another way); and none starves: slots are
// handed out in time order and a newcomer only ever overtakes later deadlines.
//
// Memory: a slot per waiting eviction, and a bucket per namespace with
// waiting evictions or a bucket not yet full again; an idle, full bucket is
// dropped, and the map of holders is rebuilt when it shrinks to a quarter of
// its peak.
type budgets struct {
	limit rate.Limit
	burst int
	perNS bool

	mu          sync.Mutex
	buckets     map[string]*bucket
	holders     map[types.NamespacedName]*slot
	holdersPeak int // for rebuildIfShrunk: a mass wait's map must not stay

	turn turns
}

// turns lets attempts ask for tokens in the order they started: the attempt
// numbered n may ask once every attempt numbered below n has asked or ended.
// Every attempt passes its number exactly once.
type turns struct {
	mu     sync.Mutex
	cond   sync.Cond
	next   uint64              // the lowest number not passed yet
	passed map[uint64]struct{} // numbers above next already passed
}

// wait blocks until every attempt numbered below n has passed.
func (t *turns) wait(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.next < n {
		t.cond.Wait()
	}
}

// pass records that attempt n has asked or ended. Passing a number twice, or
// 0 (no number), does nothing.
func (t *turns) pass(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n < t.next {
		return
	}
	if n > t.next {
		t.passed[n] = struct{}{}
		return
	}
	t.next++
	for {
		if _, ok := t.passed[t.next]; !ok {
			break
		}
		delete(t.passed, t.next)
		t.next++
	}
	t.cond.Broadcast()
}

type bucket struct {
	lim   *rate.Limiter
	slots []*slot // sorted by at
}

// slot is a reserved token: at is its time, res the limiter's reservation;
// key, deadline and since are its current holder's.
type slot struct {
	at       time.Time
	res      *rate.Reservation
	key      types.NamespacedName
	deadline time.Time
	since    time.Time // when the holder first waited
	b        *bucket
}

// newBudgets returns the budgets of r evictions per second with bursts of
// burst, or nil (no limit) if r is 0.
func newBudgets(r float64, burst int, perNamespace bool) *budgets {
	if r == 0 {
		return nil
	}
	b := &budgets{
		limit:   rate.Limit(r),
		burst:   max(burst, 1),
		perNS:   perNamespace,
		buckets: make(map[string]*bucket),
		holders: make(map[types.NamespacedName]*slot),
		turn:    turns{next: 1, passed: make(map[uint64]struct{})},
	}
	b.turn.cond.L = &b.turn.mu
	return b
}

// inTurn waits for the turn of attempt n, then calls take; see take. A nil
// *budgets always says ok at once.
func (b *budgets) inTurn(n uint64, key types.NamespacedName, deadline time.Time, now func() time.Time) (ok bool, waited time.Duration, until time.Time, first bool) {
	if b == nil {
		return true, 0, time.Time{}, false
	}
	b.turn.wait(n)
	defer b.turn.pass(n)
	return b.take(key, deadline, now())
}

// done passes attempt n's turn if it ends without asking for a token.
func (b *budgets) done(n uint64) {
	if b != nil {
		b.turn.pass(n)
	}
}

// take asks for a token for the eviction of key, due at deadline. It returns
// ok if the eviction may go now, with how long it waited (0 if it did not);
// otherwise the time to ask again, and whether this is the first time it
// waits. A nil *budgets always says ok.
func (b *budgets) take(key types.NamespacedName, deadline, now time.Time) (ok bool, waited time.Duration, until time.Time, first bool) {
	if b == nil {
		return true, 0, time.Time{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.holders[key]; s != nil {
		if s.at.After(now) {
			return false, 0, s.at, false
		}
		b.removeLocked(s)
		b.tidyLocked(s.b, key.Namespace, now)
		return true, now.Sub(s.since), time.Time{}, false
	}
	bk := b.bucketLocked(key.Namespace)
	r := bk.lim.ReserveN(now, 1)
	at := now.Add(r.DelayFrom(now))
	if !at.After(now) {
		return true, 0, time.Time{}, false
	}
	s := &slot{at: at, res: r, key: key, deadline: deadline, since: now, b: bk}
	i := sort.Search(len(bk.slots), func(i int) bool { return bk.slots[i].at.After(at) })
	bk.slots = append(bk.slots, nil)
	copy(bk.slots[i+1:], bk.slots[i:])
	bk.slots[i] = s
	// Move ahead of later deadlines whose slots have not come yet.
	for ; i > 0; i-- {
		prev := bk.slots[i-1]
		if !prev.deadline.After(deadline) || !prev.at.After(now) {
			break
		}
		cur := bk.slots[i]
		prev.key, cur.key = cur.key, prev.key
		prev.deadline, cur.deadline = cur.deadline, prev.deadline
		prev.since, cur.since = cur.since, prev.since
		b.holders[cur.key] = cur
	}
	mine := bk.slots[i]
	b.holders[key] = mine
	b.holdersPeak = max(b.holdersPeak, len(b.holders))
	return false, 0, mine.at, true
}

// release gives back the token reserved for key, if any, and reports whether
// there was one: its eviction ended without taking it (cancelled, no longer
// due, pod gone). The limiter gets back what no later reservation depends
// on; the evictions waiting keep their places and times (they sleep in the
// queue until them), so a wait that ends does not speed up the others: the
// budget is a bound, never exceeded.
func (b *budgets) release(key types.NamespacedName, now time.Time) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.holders[key]
	if s == nil {
		return false
	}
	b.removeLocked(s)
	s.res.CancelAt(now)
	b.tidyLocked(s.b, key.Namespace, now)
	return true
}

// holds reports whether an eviction of key holds a reserved token. A nil
// *budgets holds none.
func (b *budgets) holds(key types.NamespacedName) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.holders[key] != nil
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

func (b *budgets) removeLocked(s *slot) {
	delete(b.holders, s.key)
	b.holders = rebuildIfShrunk(b.holders, &b.holdersPeak)
	bk := s.b
	// Tokens are mostly taken in time order: from the front, in O(1).
	i := sort.Search(len(bk.slots), func(i int) bool { return !bk.slots[i].at.Before(s.at) })
	for ; i < len(bk.slots) && bk.slots[i] != s; i++ {
	}
	switch {
	case i == len(bk.slots):
	case i == 0:
		bk.slots[0] = nil
		bk.slots = bk.slots[1:]
	default:
		bk.slots = append(bk.slots[:i], bk.slots[i+1:]...)
	}
	if len(bk.slots) == 0 {
		bk.slots = nil // give the backing array back after a mass wait
	}
}

// tidyLocked drops bk if it is idle and full: a new bucket would be the same.
func (b *budgets) tidyLocked(bk *bucket, ns string, now time.Time) {
	if !b.perNS {
		return
	}
	if len(bk.slots) == 0 && bk.lim.TokensAt(now) >= float64(b.burst) {
		delete(b.buckets, ns)
	}
}
