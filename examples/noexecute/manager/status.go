package manager

import (
	"maps"
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
// UID of each pod the manager removed (or, in a dry run, would have) whose
// deletion its informer has not shown yet: a handler deciding from a cache
// that lags behind must not evict that pod again (a second event, a second
// budget token), and a dry run must treat it as gone.
type statuses struct {
	mu      sync.Mutex
	byKey   map[types.NamespacedName]evictionStatus
	removed map[types.NamespacedName]types.UID
	peak    int // of removed
}

func newStatuses() *statuses {
	return &statuses{byKey: make(map[types.NamespacedName]evictionStatus)}
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
	return st.refusals
}

func (s *statuses) get(key types.NamespacedName) evictionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// forget drops key's status: its eviction ended.
func (s *statuses) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byKey[key]; !ok {
		return
	}
	delete(s.byKey, key)
	if len(s.byKey) == 0 {
		s.byKey = make(map[types.NamespacedName]evictionStatus) // give a peak's memory back
	}
}

// markRemoved records that the pod key with this uid was removed (or would
// have been), and reports whether it was not recorded already.
func (s *statuses) markRemoved(key types.NamespacedName, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed == nil {
		s.removed = make(map[types.NamespacedName]types.UID)
	}
	if old, ok := s.removed[key]; ok && old == uid {
		return false
	}
	s.removed[key] = uid
	s.peak = max(s.peak, len(s.removed))
	return true
}

// isRemoved reports whether the pod key with this uid was removed (or, in a
// dry run, would have been).
func (s *statuses) isRemoved(key types.NamespacedName, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.removed[key]
	return ok && old == uid
}

// forgetRemoved forgets the pod key: its deletion was seen. A pod recreated
// under its name is another pod.
func (s *statuses) forgetRemoved(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.removed[key]; !ok {
		return
	}
	delete(s.removed, key)
	// Go maps keep their peak's buckets: after a mass eviction, give them
	// back once a quarter is left (amortised O(1) per deletion).
	if s.peak >= 1024 && len(s.removed) <= s.peak/4 {
		s.removed = maps.Clone(s.removed)
		s.peak = len(s.removed)
	}
}
