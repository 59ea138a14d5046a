package timedqueue

import (
	"math"
	"time"
)

// never is the heap time of a schedule that never becomes due, and the armed
// time of a stopped timer.
const never = math.MaxInt64

// Entry states.
const (
	stateFree    uint8 = iota // slot on the free list
	stateWaiting              // pending or backing off: in the heap
	stateBlocked              // pending behind a withdrawn attempt of the same key: not in the heap
	stateRunning              // an attempt is in flight
)

// entry is one live schedule, stored by value in the slab. It is kept small on
// purpose (72 bytes for a string key): the times a caller gave are kept as
// seconds, nanoseconds and an interned Location instead of three time.Time
// values, and the heap holds a copy of next so that sift compares stay in the
// heap array.
type entry[K comparable] struct {
	key        K
	seq        uint64 // unique per schedule: identity for the worker, FIFO tie-break in the heap
	next       int64  // NextAttempt in Unix nanoseconds (saturated)
	createdSec int64  // CreatedAt as Unix seconds and nanoseconds
	fireSec    int64  // FireAt as Unix seconds and nanoseconds
	createdNs  int32
	fireNs     int32
	heapPos    int32 // index in the heap, -1 if not in it
	attempts   int32 // failed attempts so far
	state      uint8
	createdLoc uint8 // index into store.locs
	fireLoc    uint8
}

// hnode is one heap element: the ordering key next to the slab index.
type hnode struct {
	at  int64
	idx int32
}

// store holds the queue's schedules: a slab of entries with a free list, a map
// from key to slab index, and a 4-ary min-heap of slab indices ordered by
// (next, seq). It is not safe for concurrent use; the queue's mutex guards it.
type store[K comparable] struct {
	slab []entry[K]
	free []int32
	m    map[K]int32
	heap []hnode
	seq  uint64
	locs []*time.Location // interned Locations; index 0 is UTC
}

func newStore[K comparable]() *store[K] {
	return &store[K]{m: make(map[K]int32), locs: []*time.Location{time.UTC}}
}

// alloc returns the index of a free slot, growing the slab if needed.
func (s *store[K]) alloc() int32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		return i
	}
	s.slab = append(s.slab, entry[K]{})
	return int32(len(s.slab) - 1)
}

// release zeroes slot i (so the key can be collected) and puts it on the free list.
func (s *store[K]) release(i int32) {
	s.slab[i] = entry[K]{heapPos: -1}
	s.free = append(s.free, i)
}

// nextSeq returns a new schedule sequence number.
func (s *store[K]) nextSeq() uint64 {
	s.seq++
	return s.seq
}

// less reports whether heap node a orders before b.
func (s *store[K]) less(a, b hnode) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return s.slab[a.idx].seq < s.slab[b.idx].seq
}

func (s *store[K]) set(pos int, n hnode) {
	s.heap[pos] = n
	s.slab[n.idx].heapPos = int32(pos)
}

// push adds slot i to the heap at time at.
func (s *store[K]) push(i int32, at int64) {
	s.heap = append(s.heap, hnode{})
	s.up(len(s.heap)-1, hnode{at: at, idx: i})
}

// top returns the earliest heap node; the heap must not be empty.
func (s *store[K]) top() hnode { return s.heap[0] }

// pop removes and returns the slot index of the earliest heap node.
func (s *store[K]) pop() int32 {
	i := s.heap[0].idx
	s.remove(0)
	return i
}

// remove removes the heap node at pos.
func (s *store[K]) remove(pos int) {
	s.slab[s.heap[pos].idx].heapPos = -1
	last := len(s.heap) - 1
	n := s.heap[last]
	s.heap = s.heap[:last]
	if pos == last {
		return
	}
	s.fix(pos, n)
}

// fix places node n at pos and restores the heap order around it.
func (s *store[K]) fix(pos int, n hnode) {
	if pos > 0 && s.less(n, s.heap[(pos-1)/4]) {
		s.up(pos, n)
	} else {
		s.down(pos, n)
	}
}

// up moves node n from the hole at pos towards the root.
func (s *store[K]) up(pos int, n hnode) {
	for pos > 0 {
		parent := (pos - 1) / 4
		if !s.less(n, s.heap[parent]) {
			break
		}
		s.set(pos, s.heap[parent])
		pos = parent
	}
	s.set(pos, n)
}

// down moves node n from the hole at pos towards the leaves.
func (s *store[K]) down(pos int, n hnode) {
	h := s.heap
	for {
		first := 4*pos + 1
		if first >= len(h) {
			break
		}
		best := first
		end := min(first+4, len(h))
		for c := first + 1; c < end; c++ {
			if s.less(h[c], h[best]) {
				best = c
			}
		}
		if !s.less(h[best], n) {
			break
		}
		s.set(pos, h[best])
		pos = best
	}
	s.set(pos, n)
}

// locIndex interns l and returns its index. Past 255 distinct Locations it
// falls back to UTC (the instant is kept; only its presentation changes).
func (s *store[K]) locIndex(l *time.Location) uint8 {
	for i, x := range s.locs {
		if x == l {
			return uint8(i)
		}
	}
	if len(s.locs) > math.MaxUint8 {
		return 0
	}
	s.locs = append(s.locs, l)
	return uint8(len(s.locs) - 1)
}

// packTime splits t into what an entry keeps of it.
func (s *store[K]) packTime(t time.Time) (sec int64, ns int32, loc uint8) {
	return t.Unix(), int32(t.Nanosecond()), s.locIndex(t.Location())
}

// unpackTime rebuilds the time packTime split. The result has no monotonic
// clock reading.
func (s *store[K]) unpackTime(sec int64, ns int32, loc uint8) time.Time {
	return time.Unix(sec, int64(ns)).In(s.locs[loc])
}

// Bounds of the Unix seconds whose nanoseconds fit in an int64.
const (
	minNanoSec = math.MinInt64/int64(time.Second) + 1
	maxNanoSec = math.MaxInt64/int64(time.Second) - 1
)

// unixNano returns t as Unix nanoseconds, saturated to the int64 range instead
// of overflowing (FireAt after the year 2262 becomes never).
func unixNano(t time.Time) int64 {
	switch sec := t.Unix(); {
	case sec > maxNanoSec:
		return never
	case sec < minNanoSec:
		return math.MinInt64
	}
	return t.UnixNano()
}

// addNano returns t+d saturated to the int64 range; d ≥ 0.
func addNano(t int64, d time.Duration) int64 {
	if t > math.MaxInt64-int64(d) {
		return never
	}
	return t + int64(d)
}
