package manager

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// failedEvictions holds the evictions given up because their attempts ran
// out, as Pending shows them, until a handler decides for the pod again (it
// schedules or cancels) or the pod goes. Kept only for those: it costs
// nothing while evictions succeed.
type failedEvictions struct {
	mu sync.Mutex
	m  map[types.NamespacedName]PendingEviction
}

func (f *failedEvictions) add(p PendingEviction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.NamespacedName]PendingEviction{}
	}
	f.m[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
}

// forget drops key's record and reports whether there was one.
func (f *failedEvictions) forget(key types.NamespacedName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.m[key]; !ok {
		return false
	}
	delete(f.m, key)
	if len(f.m) == 0 {
		f.m = nil // give a peak's memory back
	}
	return true
}

func (f *failedEvictions) holds(key types.NamespacedName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.m[key]
	return ok
}

func (f *failedEvictions) appendTo(out []PendingEviction) []PendingEviction {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.m {
		out = append(out, p)
	}
	return out
}
