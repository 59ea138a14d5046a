package timedqueue

import (
	"hash/maphash"
	"slices"
	"time"

	"github.com/taintkit/taintkit/internal/sched"
)

// Entry states.
const (
	stateFree    uint8 = iota // slot on the free list
	stateWaiting              // pending or backing off: has one live node in the heap
	stateBlocked              // pending behind a withdrawn attempt of the same key: not in the heap
	stateRunning              // an attempt is in flight
)

// entry is one live schedule, stored by value in the slab: 64 bytes, one
// cache line, for a string key.
type entry[K comparable] struct {
	key      K
	created  moment // CreatedAt
	fire     moment // FireAt
	next     moment // NextAttempt: fire, unless an attempt failed or deferred
	gen      uint32 // the schedule's number: its heap node's, and its attempt's
	attempts int32  // failed attempts so far
	state    uint8
	deferred bool     // an attempt returned RetryAt: next may differ from fire with no failure
	locs     [2]uint8 // of CreatedAt and FireAt in store.locs, or spilled
}

// store holds a queue's schedules: entries in a slab, an index from key to
// slot, and a heap of the waiting entries (see heap.go), guarded by the
// queue's mutex.
type store[K comparable] struct {
	slab    sched.Slab[entry[K]]
	index   index[K]
	heap    sched.Heap
	waiting int    // entries in stateWaiting: live heap nodes; the rest of the heap is stale
	gen     uint32 // the last schedule number given
	// The Locations of the entries' times: an entry holds a byte for each,
	// not a pointer (16 bytes more, a second cache line). Past 255 (time.Parse
	// makes one per numeric offset), an entry's are kept by key in spill.
	locs  []*time.Location
	spill map[K][2]*time.Location
}

const spilled = 255

// locIndex returns loc's index in s.locs, adding it if there is room.
func (s *store[K]) locIndex(loc *time.Location) uint8 {
	if i := slices.Index(s.locs, loc); i >= 0 {
		return uint8(i)
	}
	if len(s.locs) == spilled {
		return spilled
	}
	s.locs = append(s.locs, loc)
	return uint8(len(s.locs) - 1)
}

// unspill drops what spill holds for e before e changes.
func (s *store[K]) unspill(e *entry[K]) {
	if e.locs[0] == spilled {
		if delete(s.spill, e.key); len(s.spill) == 0 {
			s.spill = nil // a Go map never shrinks
		}
	}
}

func (s *store[K]) snapshot(e *entry[K]) TimedWorker[K] {
	var locs [2]*time.Location
	if e.locs[0] == spilled {
		locs = s.spill[e.key]
	} else {
		locs = [2]*time.Location{s.locs[e.locs[0]], s.locs[e.locs[1]]}
	}
	return TimedWorker[K]{Key: e.key, CreatedAt: e.created.time(locs[0]), FireAt: e.fire.time(locs[1]),
		Attempts: int(e.attempts), NextAttempt: e.next.time(locs[1]), Running: e.state == stateRunning}
}

// minShrink is the slot count under which nothing shrinks: a few KiB.
const minShrink = 256

func newStore[K comparable]() store[K] {
	return store[K]{index: index[K]{seed: maphash.MakeSeed()}}
}

// at returns the entry in slot i.
func (s *store[K]) at(i int32) *entry[K] { return s.slab.At(i) }

// add puts a new schedule for key, not yet in the heap, in a free slot,
// indexed at the pos and tag find returned.
func (s *store[K]) add(key K, pos, tag uint32, createdAt, fireAt time.Time) int32 {
	i := s.slab.Alloc()
	e := s.at(i)
	e.key = key
	s.setTimes(e, createdAt, fireAt)
	s.index.Insert(pos, tag, i)
	return i
}

// setTimes makes e a new schedule at createdAt and fireAt, with a new gen.
func (s *store[K]) setTimes(e *entry[K], createdAt, fireAt time.Time) {
	s.unspill(e)
	e.created, e.fire = momentOf(createdAt), momentOf(fireAt)
	e.locs = [2]uint8{s.locIndex(createdAt.Location()), s.locIndex(fireAt.Location())}
	if e.locs[0] == spilled || e.locs[1] == spilled {
		if e.locs = [2]uint8{spilled, spilled}; s.spill == nil {
			s.spill = make(map[K][2]*time.Location)
		}
		s.spill[e.key] = [2]*time.Location{createdAt.Location(), fireAt.Location()}
	}
	e.next, e.attempts, e.deferred = e.fire, 0, false
	s.gen++
	e.gen = s.gen
}

// remove frees slot i, at index position pos; the caller unwaits a waiting entry.
func (s *store[K]) remove(i int32, pos uint32) {
	s.index.Delete(pos)
	s.unspill(s.at(i))
	s.slab.Free(i)
}

// shrink gives memory back once at most a quarter of the slab's slots hold an
// entry: it copies them, in order, to a slab of their size and rebuilds the
// index and the heap: O(n) after 3n/4 releases, with no shrink-grow cycle.
// Slot numbers change: the caller holds none across it.
func (s *store[K]) shrink() {
	used := s.slab.Len()
	if used <= minShrink || s.index.Len()*4 > used {
		return
	}
	old := s.slab
	s.slab = sched.Slab[entry[K]]{}
	s.index.Reset(s.index.Len())
	for j := range int32(used) {
		if e := old.At(j); e.state != stateFree {
			i := s.slab.Alloc()
			*s.at(i) = *e
			_, pos, tag := s.index.find(&s.slab, e.key)
			s.index.Insert(pos, tag, i)
		}
	}
	s.heap = s.appendWaiting(make(sched.Heap, 0, s.waiting), -1)
	s.heap.Heapify()
}
