package timedqueue

import "time"

// Entry states.
const (
	stateFree    uint8 = iota // slot on the free list
	stateWaiting              // pending or backing off: has one live node in the heap
	stateBlocked              // pending behind a withdrawn attempt of the same key: not in the heap
	stateRunning              // an attempt is in flight
)

// entry is one live schedule, stored by value in the slab: 80 bytes for a
// string key, its times as moments and Locations rather than time.Time values
// of 24 bytes each.
type entry[K comparable] struct {
	key                 K
	createdLoc, fireLoc *time.Location
	created             moment // CreatedAt
	fire                moment // FireAt
	next                moment // NextAttempt: fire, unless an attempt failed or deferred
	gen                 uint32 // the schedule's number: its heap node's, and its attempt's
	attempts            int32  // failed attempts so far
	state               uint8
	deferred            bool // an attempt returned RetryAt: next may differ from fire with no failure
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
}

// minShrink is the slot count under which nothing shrinks: a few KiB.
const minShrink = 256

func newStore[K comparable]() store[K] {
	return store[K]{index: newIndex[K]()}
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
	e.created, e.fire = momentOf(createdAt), momentOf(fireAt)
	e.createdLoc, e.fireLoc = createdAt.Location(), fireAt.Location()
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
	*s.at(i) = entry[K]{} // so that the key can be collected
	s.free = append(s.free, i)
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
