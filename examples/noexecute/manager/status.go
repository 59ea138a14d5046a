package manager

import (
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

// statuses holds the evictionStatus of each eviction that has one, and, in a
// dry run, the UID of each pod a "would delete" was recorded for.
type statuses struct {
	mu         sync.Mutex
	byKey      map[types.NamespacedName]evictionStatus
	byKeyPeak  int // for rebuildIfShrunk, as dryRunPeak
	dryRun     map[types.NamespacedName]types.UID
	dryRunPeak int
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
	s.byKeyPeak = max(s.byKeyPeak, len(s.byKey))
	return st.refusals
}

// holds reports whether there is a status or a dry run's record for key.
func (s *statuses) holds(key types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, st := s.byKey[key]
	_, dry := s.dryRun[key]
	return st || dry
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

// firstDryRun reports whether no "would delete" was recorded yet for the pod
// key with this uid, and records it.
func (s *statuses) firstDryRun(key types.NamespacedName, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dryRun == nil {
		s.dryRun = make(map[types.NamespacedName]types.UID)
	}
	if old, ok := s.dryRun[key]; ok && old == uid {
		return false
	}
	s.dryRun[key] = uid
	s.dryRunPeak = max(s.dryRunPeak, len(s.dryRun))
	return true
}

// forgetDryRun forgets the pod key (it was deleted): a pod recreated under
// its name gets its own "would delete". It reports whether there was a
// record.
func (s *statuses) forgetDryRun(key types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.dryRun[key]; !ok {
		return false
	}
	delete(s.dryRun, key)
	s.dryRun = rebuildIfShrunk(s.dryRun, &s.dryRunPeak)
	return true
}

// dryRunDone reports whether a "would delete" was recorded for the pod key
// with this uid: in a dry run that pod is gone, as far as decisions go.
func (s *statuses) dryRunDone(key types.NamespacedName, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.dryRun[key]
	return ok && old == uid
}
