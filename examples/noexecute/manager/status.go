package manager

import (
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// evictionStatus is what Pending shows of an eviction beyond the queue's
// entry: the refusals of a disruption budget (which the queue does not count
// as attempts) and the last error. Kept only for evictions that failed or were
// refused, and forgotten when the eviction ends, so it costs nothing for the
// usual eviction that succeeds at once.
type evictionStatus struct {
	refusals int
	lastErr  string
}

// statuses holds the evictionStatus of each eviction that has one, and the
// UID of each pod the manager removed or is removing (or, in a dry run, would
// have) whose deletion its informer has not shown yet: a handler deciding
// from a cache that lags behind must not evict that pod again (a second
// event, a second budget token), a dry run must treat it as gone, and the
// handler of the deletion must know it for the manager's own.
//
// Every eviction records a removal and every handler and eviction looks one
// up, so removals are kept in stripes, each under a mutex of its own, as a
// 64-bit hash of the pod's UID under a 64-bit hash of its key: 16 bytes a
// pod. (Two pods under one key whose UIDs collide, with probability 2⁻⁶⁴,
// would have the second taken for removed until the first's deletion is
// seen.)
type statuses struct {
	mu        sync.Mutex
	byKey     map[types.NamespacedName]evictionStatus
	byKeyPeak int // for rebuildIfShrunk

	seed    maphash.Seed
	removed [podStripes]removedStripe
}

type removedStripe struct {
	mu   sync.Mutex
	uids map[uint64]uint64 // uid hash by key hash
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
	st := s.byKey[key]
	st.lastErr = err.Error()
	if refused {
		st.refusals++
	}
	s.byKey[key] = st
	s.byKeyPeak = max(s.byKeyPeak, len(s.byKey))
	return st.refusals
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

// removal returns the stripe of key and the hashes of key and uid.
func (s *statuses) removal(key types.NamespacedName, uid types.UID) (st *removedStripe, k, u uint64) {
	k = maphash.Comparable(s.seed, key)
	if uid != "" {
		u = maphash.String(s.seed, string(uid)) | 1 // never 0: 0 is no record
	}
	return &s.removed[k>>(64-6)], k, u
}

// markRemoved records that the pod key with this uid was removed (or would
// have been), and reports whether it was not recorded already.
func (s *statuses) markRemoved(key types.NamespacedName, uid types.UID) bool {
	st, k, u := s.removal(key, uid)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.uids[k] == u {
		return false
	}
	st.uids[k] = u
	st.peak = max(st.peak, len(st.uids))
	return true
}

// unmarkRemoved takes back markRemoved's record of the pod key with this uid,
// if it is still there: the request that was to remove the pod failed.
func (s *statuses) unmarkRemoved(key types.NamespacedName, uid types.UID) {
	st, k, u := s.removal(key, uid)
	st.mu.Lock()
	defer st.mu.Unlock()
	if old, ok := st.uids[k]; ok && old == u {
		delete(st.uids, k)
	}
}

// isRemoved reports whether the pod key with this uid was removed (or, in a
// dry run, would have been).
func (s *statuses) isRemoved(key types.NamespacedName, uid types.UID) bool {
	st, k, u := s.removal(key, uid)
	st.mu.Lock()
	defer st.mu.Unlock()
	old, ok := st.uids[k]
	return ok && old == u
}

// forgetRemoved forgets the pod key: its deletion was seen. A pod recreated
// under its name is another pod. It reports whether there was a record.
func (s *statuses) forgetRemoved(key types.NamespacedName) bool {
	st, k, _ := s.removal(key, "")
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.uids[k]; !ok {
		return false
	}
	delete(st.uids, k)
	// Go maps keep their peak's memory: after a mass eviction, give it back
	// once a quarter is left (amortised O(1) per deletion).
	st.uids = rebuildIfShrunk(st.uids, &st.peak)
	return true
}
