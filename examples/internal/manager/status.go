package manager

import (
	"hash/maphash"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// evictionStatus is what Pending shows of an eviction beyond the queue's
// entry: the refusals of a disruption budget (which the queue does not count
// as attempts) and the last error. Kept only for evictions that failed or were
// refused, and forgotten when the eviction ends, so it costs nothing for the
// usual eviction that succeeds at once.
//
// The queue's record of an attempt is the truth: a failure is what the queue
// counts (an error returned, a panic, a runtime.Goexit), recorded by the
// eviction's own return when it returned one and by the queue's retry hook
// for any (evictionRetried); an eviction ends on its return (success, or a
// cancel that withdrew it) or in the failure hook (evictionFailed). Nothing
// is decided while a panic or Goexit unwinds an attempt. (An attempt
// withdrawn while it ran fails uncounted, reported to no hook: its error is
// recorded only if it returned one.)
type evictionStatus struct {
	refusals int
	lastErr  string
	// failures counts the attempts that failed (refusals aside), since
	// failingSince; warnedAt is when the last Warning said so.
	failures     int
	failingSince time.Time
	warnedAt     time.Time
	// marked is the uidHash of the pod whose "Marking for deletion" event
	// was recorded, for the deadline markedFor: one event per decision;
	// uid is that pod's UID, for the events that follow.
	marked    uint64
	markedFor time.Time
	uid       types.UID
}

// statuses holds the evictionStatus of each eviction that has one, and the
// UID of each pod the manager removed (or, in a dry run, would have) whose
// deletion its informer has not shown yet: a handler deciding from a cache
// that lags behind must not evict that pod again (a second event, a second
// budget token), and a dry run must treat it as gone.
//
// Every eviction records a removal and every handler and eviction looks one
// up, so removals are kept in stripes, each under a mutex of its own, as a
// 64-bit word (62 bits of a hash of the pod's UID, and 2 saying whether the
// write that removes it has returned) under a 64-bit hash of its key: 16
// bytes a pod. A record belongs to the pod with that UID: it is replaced by the
// record of a pod recreated under the name and removed in turn, and
// forgotten by the delete event of the pod it names (the event's item
// carries the UID's hash), so that a predecessor's delete event, handled late
// by its old node's shard, never forgets its successor's. It is made before
// the write that removes the pod (startRemoval), so that a delete event
// handled before the write returns forgets it too. (Two pods under one key
// whose UIDs collide, with probability 2⁻⁶², would have the second taken for
// removed until the first's deletion is seen.)
type statuses struct {
	mu        sync.Mutex
	byKey     map[types.NamespacedName]evictionStatus
	byKeyPeak int // for rebuildIfShrunk

	seed    maphash.Seed
	removed [podStripes]removedStripe
}

// podStripes is the number of removal records' stripes: a power of two,
// well above the number of goroutines that look pods up at once on a
// machine of a few dozen cores (Shards plus MaxConcurrentEvictions, 40 by
// default).
const podStripes = 64

type removedStripe struct {
	mu   sync.Mutex
	uids map[uint64]uint64 // removal record by key hash
	peak int               // for rebuildIfShrunk

	_ [64]byte // keep stripes' mutexes off each other's cache lines
}

func newStatuses() *statuses {
	s := &statuses{byKey: make(map[types.NamespacedName]evictionStatus), seed: maphash.MakeSeed()}
	for i := range s.removed {
		s.removed[i].uids = make(map[uint64]uint64)
	}
	return s
}

// failed records err as key's last error; refused also counts a refusal and
// returns how many there have been.
func (s *statuses) failed(key types.NamespacedName, err error, refused bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failedLocked(key, err, refused)
}

func (s *statuses) failedLocked(key types.NamespacedName, err error, refused bool) int {
	st := s.byKey[key]
	st.lastErr = err.Error()
	if refused {
		st.refusals++
	}
	s.byKey[key] = st
	s.byKeyPeak = max(s.byKeyPeak, len(s.byKey))
	return st.refusals
}

// failedAt records a failed attempt of key's eviction at now, with err as
// its last error, and reports whether to say so with a Warning: at the
// second failure, then at most once per interval. It returns the status as
// recorded.
func (s *statuses) failedAt(key types.NamespacedName, err error, now time.Time, interval time.Duration) (evictionStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failedLocked(key, err, false)
	st := s.byKey[key]
	st.failures++
	if st.failingSince.IsZero() {
		st.failingSince = now
	}
	warn := st.failures >= 2 && (st.warnedAt.IsZero() || now.Sub(st.warnedAt) >= interval)
	if warn {
		st.warnedAt = now
	}
	s.byKey[key] = st
	return st, warn
}

// markOnce reports whether the "Marking for deletion" event of the pod key
// with this uid, for deadline, is still to be recorded, and records that it
// is.
func (s *statuses) markOnce(key types.NamespacedName, uid types.UID, deadline time.Time) bool {
	u := s.uidHash(uid)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.byKey[key]
	if st.marked == u && st.markedFor.Equal(deadline) {
		return false
	}
	st.marked, st.markedFor, st.uid = u, deadline, uid
	s.byKey[key] = st
	s.byKeyPeak = max(s.byKeyPeak, len(s.byKey))
	return true
}

// failing returns how many evictions are failing, and the earliest time
// one of them started failing.
func (s *statuses) failing() (n int, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.byKey {
		if st.failingSince.IsZero() {
			continue
		}
		if n++; since.IsZero() || st.failingSince.Before(since) {
			since = st.failingSince
		}
	}
	return n, since
}

// failedIf records err as key's last error, as failed does, if current,
// called under the statuses' lock, reports true. Whatever records or forgets
// key after current has returned true does so after err is recorded.
func (s *statuses) failedIf(key types.NamespacedName, err error, current func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if current() {
		s.failedLocked(key, err, false)
	}
}

// holds reports whether there is a status for key.
func (s *statuses) holds(key types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.byKey[key]
	return ok
}

func (s *statuses) get(key types.NamespacedName) evictionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// forget drops key's status: its eviction ended. It reports whether there
// was one.
func (s *statuses) forget(key types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byKey[key]; !ok {
		return false
	}
	delete(s.byKey, key)
	s.byKey = rebuildIfShrunk(s.byKey, &s.byKeyPeak) // give a peak's memory back
	return true
}

// A removal record is the hash of the pod's UID (uidHash, whose two low bits
// are set) with one of the two low bits cleared to say which record it is:
// removed (or, in a dry run, would have been), or being removed (a write that
// may delete the pod is in flight).
const (
	recordRemoved  = ^uint64(2) // clears bit 1: ...01
	recordRemoving = ^uint64(1) // clears bit 0: ...10
)

// uidHash is how a removal record names a pod's UID: its two low bits are set
// (so it is never 0, which is no record), and are cleared one at a time in a
// record.
func (s *statuses) uidHash(uid types.UID) uint64 {
	return maphash.String(s.seed, string(uid)) | 3
}

// removal returns the stripe of key and the hash of key.
func (s *statuses) removal(key types.NamespacedName) (st *removedStripe, k uint64) {
	k = maphash.Comparable(s.seed, key)
	return &s.removed[k>>(64-6)], k
}

// markRemoved records that the pod key with this uid would have been removed
// (a dry run), and reports whether it was not recorded already. It replaces
// the record of a pod that had the name before.
func (s *statuses) markRemoved(key types.NamespacedName, uid types.UID) bool {
	st, k := s.removal(key)
	r := s.uidHash(uid) & recordRemoved
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.uids[k] == r {
		return false
	}
	st.uids[k] = r
	st.peak = max(st.peak, len(st.uids))
	return true
}

// startRemoval records that a write that may delete the pod key with this
// uid is about to be made; endRemoval must follow when it returns. The pod's
// delete event may be handled before the write returns (an informer's watch
// can be faster than the call's response): forgetRemoved then forgets this
// record, and endRemoval, finding none, records nothing, so no record
// outlives the event. If the write panics or calls runtime.Goexit, the record
// stays, taken for nothing (isRemoved is false), until the next write's or
// the delete event.
func (s *statuses) startRemoval(key types.NamespacedName, uid types.UID) {
	st, k := s.removal(key)
	w := s.uidHash(uid) & recordRemoving
	st.mu.Lock()
	defer st.mu.Unlock()
	st.uids[k] = w
	st.peak = max(st.peak, len(st.uids))
}

// endRemoval ends what startRemoval began: if the write removed the pod, it
// records so, unless the pod's delete event has been handled already;
// otherwise it withdraws the record.
func (s *statuses) endRemoval(key types.NamespacedName, uid types.UID, removed bool) {
	st, k := s.removal(key)
	u := s.uidHash(uid)
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.uids[k] != u&recordRemoving:
	case removed:
		st.uids[k] = u & recordRemoved
	default:
		st.forgetLocked(k)
	}
}

// isRemoved reports whether the pod key with this uid was removed (or, in a
// dry run, would have been).
func (s *statuses) isRemoved(key types.NamespacedName, uid types.UID) bool {
	st, k := s.removal(key)
	r := s.uidHash(uid) & recordRemoved
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.uids[k] == r
}

// forgetRemoved forgets the record of the pod key whose UID hashes to u
// (uidHash): that pod's deletion was seen. The record of another pod under
// the name (one recreated since) stays. It reports whether there was a
// record to forget.
func (s *statuses) forgetRemoved(key types.NamespacedName, u uint64) bool {
	st, k := s.removal(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	if old, ok := st.uids[k]; !ok || old|3 != u {
		return false
	}
	st.forgetLocked(k)
	return true
}

func (st *removedStripe) forgetLocked(k uint64) {
	delete(st.uids, k)
	// Go maps keep their peak's memory: after a mass eviction, give it back
	// once a quarter is left (amortised O(1) per deletion).
	st.uids = rebuildIfShrunk(st.uids, &st.peak)
}
