package timedqueue

import (
	"hash/maphash"
	"slices"
	"time"
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

// store holds a queue's schedules: entries in a slab, with a free list, an
// index from key to slot, and a heap of the waiting entries (see heap.go),
// guarded by the queue's mutex.
type store[K comparable] struct {
	slab    slab[K]
	free    []int32
	index   index[K]
	heap    []node
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
func (s *store[K]) at(i int32) *entry[K] { return s.slab.at(i) }

// add puts a new schedule for key, not yet in the heap, in a free slot,
// indexed at the pos and tag find returned.
func (s *store[K]) add(key K, pos, tag uint32, createdAt, fireAt time.Time) int32 {
	var i int32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
	} else {
		i = s.slab.grow()
	}
	e := s.at(i)
	e.key = key
	s.setTimes(e, createdAt, fireAt)
	s.index.insertAt(pos, tag, i)
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
	s.index.deleteAt(pos)
	s.unspill(s.at(i))
	*s.at(i) = entry[K]{} // so that the key can be collected
	s.free = append(s.free, i)
}

// shrink gives memory back once at most a quarter of the slab's slots hold an
// entry: it copies them, in order, to a slab of their size and rebuilds the
// index and the heap: O(n) after 3n/4 releases, with no shrink-grow cycle.
// Slot numbers change: the caller holds none across it.
func (s *store[K]) shrink() {
	used := s.slab.len()
	if used <= minShrink || s.index.n*4 > used {
		return
	}
	old := s.slab
	s.slab, s.free = slab[K]{}, nil
	s.index.reset(s.index.n)
	for j := range int32(used) {
		if e := old.at(j); e.state != stateFree {
			i := s.slab.grow()
			*s.at(i) = *e
			_, pos, tag := s.index.find(&s.slab, e.key)
			s.index.insertAt(pos, tag, i)
		}
	}
	s.heap = s.appendWaiting(make([]node, 0, s.waiting), -1)
	s.heapify()
}

// slab holds the entries in pages of slabPage entries: it grows a page at a
// time, with no copy of the whole slab under the queue's lock. The first page
// doubles from 8 entries, so that a small queue stays small. Slots [0, len)
// are allocated, free or not.
type slab[K comparable] struct {
	pages [][]entry[K] // each of slabPage entries, but the first while it grows
	n     int32        // allocated slots
}

// slabShift sets slabPage: 1024 entries, a multiple of 8 KiB for a key of
// 8-byte alignment, which Go allocates with no rounding and no header.
const (
	slabShift = 10
	slabPage  = 1 << slabShift
	slabMask  = slabPage - 1
)

// at returns slot i, which must be allocated.
func (sl *slab[K]) at(i int32) *entry[K] { return &sl.pages[i>>slabShift][i&slabMask] }

// len returns the number of allocated slots.
func (sl *slab[K]) len() int { return int(sl.n) }

// grow allocates one more slot and returns it, zeroed.
func (sl *slab[K]) grow() int32 {
	i := sl.n
	switch p := int(i >> slabShift); {
	case p == len(sl.pages):
		size := slabPage
		if p == 0 {
			size = 8
		}
		sl.pages = append(sl.pages, make([]entry[K], size))
	case p == 0 && int(i) == len(sl.pages[0]):
		sl.pages[0] = append(sl.pages[0], make([]entry[K], min(len(sl.pages[0]), slabPage-len(sl.pages[0])))...)
	}
	sl.n++
	return i
}
