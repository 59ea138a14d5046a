package timedqueue

import "time"

// Entry states.
const (
	stateFree    uint8 = iota // slot on the free list
	stateWaiting              // pending or backing off: has one live node in the heap
	stateBlocked              // pending behind a withdrawn attempt of the same key: not in the heap
	stateRunning              // an attempt is in flight
)

// entry is one live schedule, stored by value in the slab: 64 bytes for a
// string key, its times as moments and one-byte Location indices (see
// locations) rather than time.Time values of 24 bytes each.
type entry[K comparable] struct {
	key      K
	created  moment // CreatedAt
	fire     moment // FireAt
	next     moment // NextAttempt: fire, unless an attempt failed or deferred
	gen      uint32 // the schedule's number: its heap node's, and its attempt's
	attempts int32  // failed attempts so far
	state    uint8
	deferred bool // an attempt returned RetryAt: next may differ from fire with no failure
	// Location indices of CreatedAt and FireAt.
	createdLoc, fireLoc uint8
}

// store holds a queue's schedules: entries in a slab, with a free list, an
// index from key to slot, and a heap of the waiting entries (see heap.go). It
// is not safe for concurrent use; the queue's mutex guards it.
//
// Memory comes back when the schedules go: once at most a quarter of the
// slab's slots are used, shrink moves the entries to the lowest slots and
// gives the rest back; the index and the heap shrink likewise. Each shrink
// costs O(n) and follows at least 3n/4 releases: O(1) amortised, and a size
// hovering around a threshold does not make them shrink and grow in turn.
type store[K comparable] struct {
	slab    slab[K]
	free    []int32
	index   index[K]
	heap    []node
	waiting int    // entries in stateWaiting: live heap nodes; the rest of the heap is stale
	gen     uint32 // the last schedule number given
	locs    locations[K]
}

// minShrink is the slot count under which nothing shrinks: a few KiB.
const minShrink = 256

func newStore[K comparable]() store[K] {
	return store[K]{index: newIndex[K](), locs: newLocations[K]()}
}

// at returns the entry in slot i.
func (s *store[K]) at(i int32) *entry[K] { return s.slab.at(i) }

// add fills a free slot with a new schedule for key, not yet in the heap,
// and indexes it at pos and tag, as the index's find returned them.
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
	s.locs.forget(e)
	e.created, e.fire = momentOf(createdAt), momentOf(fireAt)
	e.createdLoc, e.fireLoc = s.locs.index(e.key, createdAt.Location(), fireAt.Location())
	e.next, e.attempts, e.deferred = e.fire, 0, false
	s.gen++
	e.gen = s.gen
}

// remove frees slot i, whose index position is pos. A heap node left for
// the slot becomes stale: the caller calls unwait if the entry was waiting.
func (s *store[K]) remove(i int32, pos uint32) {
	s.index.deleteAt(pos)
	s.release(i)
}

// release frees slot i, whose key the caller has taken out of the index.
func (s *store[K]) release(i int32) {
	e := s.at(i)
	s.locs.forget(e)
	*e = entry[K]{} // so that the key can be collected
	s.free = append(s.free, i)
}

// createdAt returns the CreatedAt of e, as given, without a monotonic reading.
func (s *store[K]) createdAt(e *entry[K]) time.Time {
	return e.created.time(s.locs.created(e))
}

// fireAt returns the FireAt of e, as given, without a monotonic reading.
func (s *store[K]) fireAt(e *entry[K]) time.Time {
	return e.fire.time(s.locs.fire(e))
}

// shrink gives memory back once at most a quarter of the slab's slots hold an
// entry: it moves the entries to the lowest slots, frees the pages above them
// and the free list, and rebuilds the heap. Slot numbers change: the caller
// holds none across it (a running attempt finds its entry by key).
func (s *store[K]) shrink() {
	used, live := s.slab.len(), s.index.len()
	if used <= minShrink || live*4 > used {
		return
	}
	// Two fingers: move the highest used slot into the lowest free one.
	lo, hi := int32(0), int32(used-1)
	for {
		for lo < hi && s.at(lo).state != stateFree {
			lo++
		}
		for hi > lo && s.at(hi).state == stateFree {
			hi--
		}
		if lo >= hi {
			break
		}
		e := s.at(hi)
		s.index.repoint(&s.slab, e.key, lo)
		*s.at(lo), *e = *e, entry[K]{}
		lo++
		hi--
	}
	s.slab.truncate(live)
	s.free = nil
	s.heap = s.appendWaiting(make([]node, 0, s.waiting), -1)
	s.heapify()
}

// locations interns the Locations of a store's times, so that an entry holds
// a one-byte index for each instead of an 8-byte pointer. Most queues see one
// or two Locations (Local, UTC), but time.Parse makes a new *Location for
// each numeric offset it parses: past the 255th, an entry's Locations are
// kept by key in spilled, and its indices are spilledLoc.
type locations[K comparable] struct {
	table   []*time.Location
	indices map[*time.Location]uint8
	last    uint8 // the index found last: most callers use one Location
	spilled map[K][2]*time.Location
}

const spilledLoc = 255

func newLocations[K comparable]() locations[K] {
	return locations[K]{table: []*time.Location{time.Local}, indices: map[*time.Location]uint8{time.Local: 0}}
}

// index returns the indices of created and fire, for key.
func (l *locations[K]) index(key K, created, fire *time.Location) (uint8, uint8) {
	c := l.find(created)
	f := c
	if fire != created {
		f = l.find(fire)
	}
	if c == spilledLoc || f == spilledLoc {
		if l.spilled == nil {
			l.spilled = make(map[K][2]*time.Location)
		}
		l.spilled[key] = [2]*time.Location{created, fire}
		return spilledLoc, spilledLoc
	}
	return c, f
}

func (l *locations[K]) find(loc *time.Location) uint8 {
	if l.table[l.last] == loc {
		return l.last
	}
	i, ok := l.indices[loc]
	if !ok {
		if len(l.table) == spilledLoc {
			return spilledLoc
		}
		i = uint8(len(l.table))
		l.table = append(l.table, loc)
		l.indices[loc] = i
	}
	l.last = i
	return i
}

// forget drops what e's indices hold for it, before they change.
func (l *locations[K]) forget(e *entry[K]) {
	if e.createdLoc == spilledLoc {
		delete(l.spilled, e.key)
		if len(l.spilled) == 0 {
			l.spilled = nil // a Go map never shrinks
		}
	}
}

func (l *locations[K]) created(e *entry[K]) *time.Location {
	if e.createdLoc == spilledLoc {
		return l.spilled[e.key][0]
	}
	return l.table[e.createdLoc]
}

func (l *locations[K]) fire(e *entry[K]) *time.Location {
	if e.fireLoc == spilledLoc {
		return l.spilled[e.key][1]
	}
	return l.table[e.fireLoc]
}
