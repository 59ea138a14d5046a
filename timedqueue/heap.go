package timedqueue

import (
	"container/heap"
	"math"
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

// entry is one live schedule, stored by value in the slab. It is kept small on
// purpose (56 bytes for a string key): the times a caller gave are kept as
// Unix nanoseconds and an interned Location instead of two time.Time values
// (a time outside 1678–2262 keeps its full value in store.xtimes), and it has
// no back-pointer into the heap (see store).
type entry[K comparable] struct {
	key        K
	seq        uint64 // unique per schedule: identity for the worker and for heap nodes, FIFO tie-break
	next       int64  // NextAttempt in Unix nanoseconds, saturated: see nextAt
	created    int64  // CreatedAt in Unix nanoseconds, saturated: see createdInstant
	fire       int64  // FireAt in Unix nanoseconds, saturated: see fireInstant
	attempts   int32  // failed attempts so far
	state      uint8
	deferred   bool  // an attempt returned RetryAt: next is not FireAt though attempts may be 0
	createdLoc uint8 // index into store.locs, or locOverflow: see store.xlocs
	fireLoc    uint8
}

// hnode is one heap element: everything the heap order needs, so that sifts
// never touch the slab. gen is the low 32 bits of the seq of the schedule the
// node was pushed for: it makes the node stale once that schedule is cancelled
// or rescheduled, and breaks ties in at in FIFO order. It fills what would be
// padding: a node is 16 bytes either way.
type hnode struct {
	at  int64
	idx int32
	gen uint32
}

// store holds the queue's schedules: a slab of entries with a free list, an
// index from key to slab index, and a 4-ary min-heap of nodes ordered by (at, gen).
// It is not safe for concurrent use; the queue's mutex guards it.
//
// The heap uses lazy deletion. A waiting entry has exactly one live node: one
// whose idx is the entry's slot, gen its seq's low bits and at its next.
// Cancelling or rescheduling an entry frees or changes the entry at once and
// leaves its old node in the heap, stale; stale nodes are dropped when they
// reach the top ([store.head]) and by a compaction (an O(n) rebuild) whenever more
// than a quarter of the heap is stale. So cancel costs no sift and no cache
// miss in the heap, reschedule is a push, sifts never read the slab, and the
// heap holds at most 4/3 nodes per waiting entry: cancel and reschedule are
// O(log n) amortised.
//
// The tie-break compares gens with serial-number arithmetic: schedules with
// the same at start in the order they were made unless 2³¹ schedules were made
// in between. A gen alone cannot tell a stale node from a live one after 2³²
// schedules; a node is live only if its at also matches, and a stale node that
// matches the slot, the gen and the time of a live schedule stands for exactly
// that schedule, so it can only start it at the right time, once.
//
// Memory comes back when the schedules go (see shrink): the slab, the free
// list, the index and both heaps shrink once they are four times larger than
// what they hold, to about twice that, so a size hovering around a threshold
// does not make them shrink and grow in turn, and each shrink is paid for by
// the releases before it: O(1) amortised.
type store[K comparable] struct {
	slab    slab[K]
	free    []int32
	idx     index[K] // key → slab index
	heap    []hnode
	waiting int // entries in stateWaiting with a node in heap: live nodes; len(heap)-waiting are stale
	// far and farWaiting are heap and waiting for the entries whose next is
	// saturated (see farheap.go); xnext keeps, by slot, the NextAttempt of
	// those that are backing off, at full precision. Empty and nil unless a
	// time outside 1678–2262 is used.
	far        farHeap
	farWaiting int
	xnext      map[int32]instant
	// xtimes keeps, by slot, CreatedAt and FireAt at full precision for the
	// entries where either is outside 1678–2262 (saturated). Nil until then.
	xtimes  map[int32][2]instant
	seq     uint64
	shrinks int              // times shrink compacted the slab, for tests
	locs    []*time.Location // interned Locations; index 0 is UTC
	lastLoc uint8            // index of the Location locIndex found last
	locIdx  map[*time.Location]uint8
	// xlocs keeps, by slot, the Locations of the entries whose Locations did
	// not fit in locs (index locOverflow): created, then fire. Nil until the
	// first overflow, so it costs nothing in the common case.
	xlocs map[int32][2]*time.Location
}

func newStore[K comparable]() *store[K] {
	return &store[K]{idx: newIndex[K](), locs: []*time.Location{time.UTC}}
}

// at returns the entry in slot i.
func (s *store[K]) at(i int32) *entry[K] { return s.slab.at(i) }

// alloc returns the index of a free slot, growing the slab if needed.
func (s *store[K]) alloc() int32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		return i
	}
	return s.slab.grow()
}

// release zeroes slot i (so the key can be collected) and puts it on the free
// list. A node left in the heap for it becomes stale.
func (s *store[K]) release(i int32) {
	e := s.at(i)
	if e.createdLoc == locOverflow || e.fireLoc == locOverflow {
		delete(s.xlocs, i)
	}
	if saturated(e.next) {
		delete(s.xnext, i)
	}
	if saturated(e.created) || saturated(e.fire) {
		delete(s.xtimes, i)
	}
	*e = entry[K]{}
	s.free = append(s.free, i)
}

// nextSeq returns a new schedule sequence number.
func (s *store[K]) nextSeq() uint64 {
	s.seq++
	return s.seq
}

// less reports whether heap node a orders before b.
func less(a, b hnode) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return int32(a.gen-b.gen) < 0
}

// live reports whether n is the live node of a waiting entry.
func (s *store[K]) live(n hnode) bool {
	e := s.at(n.idx)
	return e.state == stateWaiting && uint32(e.seq) == n.gen && e.next == n.at
}

// nextAt returns the NextAttempt of slot i at full precision.
func (s *store[K]) nextAt(i int32) instant {
	e := s.at(i)
	switch {
	case e.attempts == 0 && !e.deferred:
		return s.fireInstant(i)
	case saturated(e.next):
		return s.xnext[i]
	}
	return instantOfNs(e.next)
}

// setNext sets the NextAttempt of slot i, which is backing off, to at.
func (s *store[K]) setNext(i int32, at instant) {
	e := s.at(i)
	e.next = at.ns()
	if saturated(e.next) {
		if s.xnext == nil {
			s.xnext = make(map[int32]instant)
		}
		s.xnext[i] = at
	} else if s.xnext != nil {
		delete(s.xnext, i)
	}
}

// push makes slot i, whose next and seq are set, waiting and adds its node.
func (s *store[K]) push(i int32) {
	e := s.at(i)
	e.state = stateWaiting
	if saturated(e.next) {
		s.pushFar(i)
		return
	}
	s.waiting++
	s.heap = append(s.heap, hnode{})
	s.up(len(s.heap)-1, hnode{at: e.next, idx: i, gen: uint32(e.seq)})
}

// unwait records that the waiting entry in slot i stopped waiting without its
// node being popped: the caller has just freed the slot or changed its seq
// (cancel, reschedule), which made the node stale; a reschedule pushes the
// entry's new node after. far is whether its next was saturated (its node is
// in the far heap). It reports whether the top node was stale: then the
// earliest live node may have changed and the timer must be re-armed.
func (s *store[K]) unwait(i int32, far bool) (topStale bool) {
	if far {
		return s.unwaitFar()
	}
	s.waiting--
	topStale = !s.live(s.heap[0])
	s.bound(i)
	return topStale
}

// bound compacts the heap once more than a quarter of it is stale. Only
// unwait makes a node stale, so a compaction follows at least len(heap)/4
// unwaits, and it costs O(len(heap)) (see compact): O(1) amortised per
// unwait. Slot i has just stopped waiting and has no node in the heap, even
// if it is still in stateWaiting: compact must not make one for it.
func (s *store[K]) bound(i int32) {
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		s.compact(i)
	}
	if cap(s.heap) > minShrink && len(s.heap)*4 < cap(s.heap) {
		s.heap = slices.Clip(append(make([]hnode, 0, 2*len(s.heap)), s.heap...))
	}
}

// head drops the stale nodes at the top of the heap and returns the live top,
// if any.
func (s *store[K]) head() (hnode, bool) {
	for len(s.heap) > 0 {
		if n := s.heap[0]; s.live(n) {
			return n, true
		}
		s.removeTop()
	}
	return hnode{}, false
}

// peek returns the node of the earliest waiting entry over both heaps, and
// whether it is in the far heap (then its at is saturated: see first).
func (s *store[K]) peek() (n hnode, far, ok bool) {
	n, ok = s.head()
	if len(s.far) == 0 {
		return n, false, ok
	}
	x, xok := s.farHead()
	// A far time is before 1678 (sec < 0) or after 2262.
	if xok && (!ok || x.at.sec < 0) {
		return hnode{at: x.at.ns(), idx: x.idx, gen: x.gen}, true, true
	}
	return n, false, ok
}

// first returns the NextAttempt of node n from peek, at full precision.
func (s *store[K]) first(n hnode, far bool) instant {
	if far {
		return s.far[0].at
	}
	return instantOfNs(n.at)
}

// due reports whether node n from peek is due at r.
func (s *store[K]) due(n hnode, far bool, r reading) bool {
	if far {
		return !r.at.before(s.far[0].at)
	}
	return n.at <= r.ns // exact even when r.ns is saturated: n.at is not
}

// pop removes node n that peek has just returned and returns its slot, which
// the caller takes out of stateWaiting.
func (s *store[K]) pop(far bool) int32 {
	if far {
		return s.popFar()
	}
	return s.popHead()
}

// clearWaiting drops every node; the caller releases the waiting entries.
func (s *store[K]) clearWaiting() {
	s.heap, s.waiting, s.far, s.farWaiting = nil, 0, nil, 0
}

// popHead removes the live top that head has just returned and returns its
// slot, which the caller takes out of stateWaiting.
func (s *store[K]) popHead() int32 {
	i := s.heap[0].idx
	s.removeTop()
	s.waiting--
	s.bound(i)
	return i
}

// removeTop removes the top node.
func (s *store[K]) removeTop() {
	last := len(s.heap) - 1
	n := s.heap[last]
	s.heap = s.heap[:last]
	if last > 0 {
		s.down(0, n)
	}
}

// compactScan bounds the slab, in slots per heap node, that compact reads in
// slot order instead of the heap's nodes: see compact.
const compactScan = 4

// compact drops every stale node and rebuilds the heap in O(n).
//
// Whether a node is stale is in its slab entry, and the nodes are in no slot
// order: checking each one is a cache miss, for 4/3 nodes per waiting entry
// at each compaction, about four per unwait under rescheduling churn (see
// BenchmarkCompact). So unless the slab holds more than compactScan slots
// per node, compact makes the live nodes anew from the waiting entries, the
// slab read in slot order (sequential, prefetched): each waiting entry has
// exactly one live node, the one push would make for it now, except slot
// skip, which has just stopped waiting (see bound).
func (s *store[K]) compact(skip int32) {
	// The nodes left past the new length hold no pointer: no need to clear them.
	if s.slab.len() <= compactScan*len(s.heap) {
		s.heap = s.appendWaiting(s.heap[:0], skip)
	} else {
		s.heap = s.dropStale()
	}
	s.heapify()
}

// dropStale returns the live nodes of the heap, in its array, in no heap
// order, looking each node's entry up in the slab.
func (s *store[K]) dropStale() []hnode {
	h := s.heap[:0]
	for _, n := range s.heap {
		if s.live(n) {
			h = append(h, n)
		}
	}
	return h
}

// appendWaiting appends the live node of every waiting entry of the main heap
// but slot skip (-1: none) to h, in slot order, reading the slab page by page.
func (s *store[K]) appendWaiting(h []hnode, skip int32) []hnode {
	n := s.slab.len()
	for p, page := range s.slab.pages {
		base := p << slabShift
		if base >= n {
			break
		}
		for j := range page[:min(len(page), n-base)] {
			if e := &page[j]; e.state == stateWaiting && !saturated(e.next) && int32(base+j) != skip {
				h = append(h, hnode{at: e.next, idx: int32(base + j), gen: uint32(e.seq)})
			}
		}
	}
	return h
}

// heapify restores the heap order of s.heap in O(n).
func (s *store[K]) heapify() {
	h := s.heap
	for pos := (len(h) - 2) / 4; pos >= 0 && len(h) > 1; pos-- {
		s.down(pos, h[pos])
	}
}

// up moves node n from the hole at pos towards the root.
func (s *store[K]) up(pos int, n hnode) {
	h := s.heap
	for pos > 0 {
		parent := (pos - 1) / 4
		if !less(n, h[parent]) {
			break
		}
		h[pos] = h[parent]
		pos = parent
	}
	h[pos] = n
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
			if less(h[c], h[best]) {
				best = c
			}
		}
		if !less(h[best], n) {
			break
		}
		h[pos] = h[best]
		pos = best
	}
	h[pos] = n
}

// locOverflow is the Location index of an entry whose Location is not
// interned: store.xlocs holds it.
const locOverflow = math.MaxUint8

// locScan is how many interned Locations locIndex compares before it looks
// the rest up in a map.
const locScan = 8

// locIndex interns l and returns its index, or locOverflow once locOverflow
// Locations are interned (time.Parse of a numeric offset makes a new
// *Location on each call, so this is easy to reach). Lookups are O(1); the
// Location found last (most callers use one) is one comparison.
func (s *store[K]) locIndex(l *time.Location) uint8 {
	if s.locs[s.lastLoc] == l {
		return s.lastLoc
	}
	return s.internLoc(l)
}

// internLoc is locIndex for a Location other than the last one found.
func (s *store[K]) internLoc(l *time.Location) uint8 {
	i, ok := uint8(0), false
	for j, x := range s.locs[:min(len(s.locs), locScan)] {
		if x == l {
			i, ok = uint8(j), true
			break
		}
	}
	if !ok {
		i, ok = s.locIdx[l]
	}
	if !ok {
		n := len(s.locs)
		if n >= locOverflow {
			return locOverflow
		}
		s.locs = append(s.locs, l)
		if n >= locScan {
			if s.locIdx == nil {
				s.locIdx = make(map[*time.Location]uint8)
			}
			s.locIdx[l] = uint8(n)
		}
		i = uint8(n)
	}
	s.lastLoc = i
	return i
}

// setTimes stores createdAt and fireAt in slot i: as Unix nanoseconds and
// Location index, and, for a time outside 1678–2262, its instant in xtimes;
// for a Location not interned, the caller's *Location itself in xlocs. A
// Location is never changed.
func (s *store[K]) setTimes(i int32, createdAt, fireAt time.Time) {
	s.storeTimes(i, createdAt, instantOf(fireAt), fireAt.Location())
}

// retime is setTimes for a slot holding a schedule, unless fireAt is the
// FireAt stored there, to the nanosecond: then it changes nothing and
// reports false.
func (s *store[K]) retime(i int32, createdAt, fireAt time.Time) bool {
	f := instantOf(fireAt)
	if ns := f.ns(); !saturated(ns) {
		if ns == s.at(i).fire { // never equal to a saturated one
			return false
		}
	} else if f == s.fireInstant(i) {
		return false
	}
	s.storeTimes(i, createdAt, f, fireAt.Location())
	return true
}

// storeTimes is setTimes with FireAt as its instant f and Location fl.
func (s *store[K]) storeTimes(i int32, createdAt time.Time, f instant, fl *time.Location) {
	e := s.at(i)
	c := instantOf(createdAt)
	e.created, e.fire = c.ns(), f.ns()
	if saturated(e.created) || saturated(e.fire) {
		if s.xtimes == nil {
			s.xtimes = make(map[int32][2]instant)
		}
		s.xtimes[i] = [2]instant{c, f}
	} else if s.xtimes != nil {
		delete(s.xtimes, i) // a reschedule may leave a saturated time
	}
	cl := createdAt.Location()
	e.createdLoc = s.locIndex(cl)
	if e.fireLoc = e.createdLoc; fl != cl {
		e.fireLoc = s.locIndex(fl)
	}
	if e.createdLoc == locOverflow || e.fireLoc == locOverflow {
		if s.xlocs == nil {
			s.xlocs = make(map[int32][2]*time.Location)
		}
		s.xlocs[i] = [2]*time.Location{cl, fl}
	} else if s.xlocs != nil {
		delete(s.xlocs, i) // a reschedule may leave an overflowed Location
	}
}

// createdInstant returns the CreatedAt stored in slot i at full precision.
func (s *store[K]) createdInstant(i int32) instant {
	if c := s.at(i).created; !saturated(c) {
		return instantOfNs(c)
	}
	return s.xtimes[i][0]
}

// fireInstant returns the FireAt stored in slot i at full precision.
func (s *store[K]) fireInstant(i int32) instant {
	if f := s.at(i).fire; !saturated(f) {
		return instantOfNs(f)
	}
	return s.xtimes[i][1]
}

// location returns the Location of index li in slot i: its CreatedAt's, or
// its FireAt's if fire.
func (s *store[K]) location(i int32, li uint8, fire bool) *time.Location {
	if li != locOverflow {
		return s.locs[li]
	}
	p := s.xlocs[i]
	if fire {
		return p[1]
	}
	return p[0]
}

// createdAt returns the CreatedAt setTimes stored in slot i, without a
// monotonic clock reading.
func (s *store[K]) createdAt(i int32) time.Time {
	return s.createdInstant(i).time(s.location(i, s.at(i).createdLoc, false))
}

// fireAt returns the FireAt setTimes stored in slot i, without a monotonic
// clock reading.
func (s *store[K]) fireAt(i int32) time.Time {
	return s.fireInstant(i).time(s.fireLocation(i))
}

// fireLocation returns the Location of the FireAt stored in slot i.
func (s *store[K]) fireLocation(i int32) *time.Location {
	return s.location(i, s.at(i).fireLoc, true)
}

// minShrink is the size under which the slab and the heaps never shrink: a
// few KiB at most. A variable only so that tests can make everything shrink.
var minShrink = 256

// shrink gives memory back once the schedules have mostly gone: when at most
// a quarter of the slab's slots hold an entry, it moves the entries to the
// lowest slots, frees the pages above them and the free list, and rebuilds
// both heaps (dropping their stale nodes) and the maps kept by slot at the
// size of what they hold. Slot numbers change: the caller must hold none
// across it (a running attempt finds its entry by key). The slab only grows
// when the free list is empty, that is when every slot is used, so between
// two shrinks at least three quarters of the slots were released: the O(n)
// shrink is O(1) amortised per release, and a size that hovers never makes
// it shrink and grow in turn. (The index shrinks on its own: index.deleteAt.)
func (s *store[K]) shrink() {
	used := s.slab.len()
	live := s.idx.len()
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
		s.move(hi, lo)
		lo++
		hi--
	}
	s.slab.truncate(live)
	s.free = nil
	s.shrinks++
	s.xnext = cloneMap(s.xnext)
	s.xtimes = cloneMap(s.xtimes)
	s.xlocs = cloneMap(s.xlocs)
	s.rebuildHeaps()
}

// move moves the entry in slot from to the free slot to.
func (s *store[K]) move(from, to int32) {
	e := s.at(from)
	s.idx.repoint(&s.slab, e.key, to)
	if v, ok := s.xnext[from]; ok {
		delete(s.xnext, from)
		s.xnext[to] = v
	}
	if v, ok := s.xtimes[from]; ok {
		delete(s.xtimes, from)
		s.xtimes[to] = v
	}
	if v, ok := s.xlocs[from]; ok {
		delete(s.xlocs, from)
		s.xlocs[to] = v
	}
	*s.at(to) = *e
	*e = entry[K]{}
}

// rebuildHeaps rebuilds both heaps from the waiting entries, with no stale
// node, in O(n).
func (s *store[K]) rebuildHeaps() {
	s.heap = s.appendWaiting(make([]hnode, 0, s.waiting), -1)
	s.heapify()
	var far farHeap
	if s.farWaiting > 0 {
		for i := range int32(s.slab.len()) {
			if e := s.at(i); e.state == stateWaiting && saturated(e.next) {
				far = append(far, xnode{at: s.nextAt(i), idx: i, gen: uint32(e.seq)})
			}
		}
		heap.Init(&far)
	}
	s.far = far
}

// cloneMap returns a copy of m sized for what it holds (a Go map never
// shrinks), or nil if m is empty.
func cloneMap[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	c := make(M, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
