package workqueue

import (
	"hash/maphash"
	"math"
	"slices"

	"github.com/taintkit/taintkit/internal/sched"
)

// What an item is queued for, besides being processed or not.
const (
	queuedNone    uint8 = iota // nothing: the item is being processed (else it has no entry)
	queuedWaiting              // waiting for its time: one live node in the heap
	queuedReady                // ready: one live node in its lane, or held until Done if processing
)

// entry is one item of the queue, stored by value in the slab: 40 bytes for
// a string key. An item has an entry while it is queued or processed.
type entry[T comparable] struct {
	key        T
	at         sched.Moment // waiting: its time; ready: when it became ready
	gen        uint32       // given anew at each queuing: its live node's
	prio       int32        // the priority, or bigPriority: then it is in store.bigPriorities
	queued     uint8
	processing bool // handed out by Get and not Done
}

// bigPriority marks an entry whose priority does not fit in an int32: 8
// bytes an entry for what no controller sets.
const bigPriority = math.MinInt32

// store holds the items: entries in a slab, an index from key to slot, a
// heap of the waiting ones and lanes of the ready ones, guarded by the
// queue's mutex. Deletion is lazy in both: a node whose entry has moved on
// (another gen, state or time) is stale, dropped when met or by compaction.
type store[T comparable] struct {
	slab    sched.Slab[entry[T]]
	index   sched.Index
	seed    maphash.Seed
	heap    sched.Heap
	waiting int   // entries waiting: live nodes in the heap
	lanes   lanes // the ready entries not processing, by priority
	ready   int   // entries ready, held ones included
	held    int   // entries ready while processing: queued in no lane until Done
	gen     uint32

	bigPriorities map[T]int // the entries' priorities that do not fit in an int32
}

func newStore[T comparable]() store[T] { return store[T]{seed: maphash.MakeSeed()} }

func (s *store[T]) at(i int32) *entry[T] { return s.slab.At(i) }

// tag returns key's hash tag. It reads only the seed, set when the store
// is made: callers hash before they take the queue's lock.
func (s *store[T]) tag(key T) uint32 { return sched.Tag(s.seed, key) }

// find returns the slot and index position of key, whose tag is tag, or -1
// and the position where insert puts it.
func (s *store[T]) find(key T, tag uint32) (i int32, pos uint32) {
	pos, i = s.index.Lookup(tag)
	for i >= 0 && s.at(i).key != key {
		pos, i = s.index.Next(pos, tag)
	}
	return i, pos
}

// insert makes an entry for key, queued for nothing, at the position and
// tag find has just returned.
func (s *store[T]) insert(key T, pos, tag uint32) int32 {
	i := s.slab.Alloc()
	s.at(i).key = key
	s.index.Insert(pos, tag, i)
	return i
}

// release frees entry i, queued for nothing and not processing, at index
// position pos. The caller calls shrink once it holds no slot number.
func (s *store[T]) release(i int32, pos uint32) {
	s.index.Delete(pos)
	if e := s.at(i); e.prio == bigPriority {
		s.forgetBigPriority(e.key)
	}
	s.slab.Free(i)
}

// priority returns e's priority.
func (s *store[T]) priority(e *entry[T]) int {
	if e.prio != bigPriority {
		return int(e.prio)
	}
	return s.bigPriorities[e.key]
}

// setPriority sets e's priority to p.
func (s *store[T]) setPriority(e *entry[T], p int) {
	if e.prio == bigPriority {
		s.forgetBigPriority(e.key)
	}
	if p32 := int32(p); int(p32) == p && p32 != bigPriority {
		e.prio = p32
		return
	}
	if s.bigPriorities == nil {
		s.bigPriorities = make(map[T]int)
	}
	e.prio, s.bigPriorities[e.key] = bigPriority, p
}

func (s *store[T]) forgetBigPriority(key T) {
	if delete(s.bigPriorities, key); len(s.bigPriorities) == 0 {
		s.bigPriorities = nil // a Go map never shrinks
	}
}

func (s *store[T]) nextGen() uint32 {
	s.gen++
	return s.gen
}

// makeReady makes entry i ready as of now, in its lane, or held if it is
// processing; it returns 1 if it queued it in a lane.
func (s *store[T]) makeReady(i int32, now sched.Moment) int {
	s.unqueue(i)
	e := s.at(i)
	e.queued, e.at, e.gen = queuedReady, now, s.nextGen()
	s.ready++
	if e.processing {
		s.held++
		return 0
	}
	s.enqueue(i)
	return 1
}

// makeWaiting makes entry i wait until at.
func (s *store[T]) makeWaiting(i int32, at sched.Moment) {
	s.unqueue(i)
	e := s.at(i)
	e.queued, e.at, e.gen = queuedWaiting, at, s.nextGen()
	s.waiting++
	s.heap.Push(sched.Node{At: at, Slot: i, Gen: e.gen})
}

// unqueue makes entry i queued for nothing; its node, if any, goes stale.
func (s *store[T]) unqueue(i int32) {
	e := s.at(i)
	was := e.queued
	e.queued = queuedNone // its node is stale from here
	switch was {
	case queuedWaiting:
		s.waiting--
		s.dropStaleIfMany()
	case queuedReady:
		s.ready--
		if e.processing {
			s.held--
		} else {
			s.leave(s.priority(e))
		}
	}
}

// raise gives queued entry i the higher priority prio: a ready entry goes
// last among that priority's.
func (s *store[T]) raise(i int32, prio int) {
	e := s.at(i)
	if e.queued != queuedReady {
		s.setPriority(e, prio)
		return
	}
	if !e.processing {
		s.leave(s.priority(e))
	}
	s.setPriority(e, prio)
	e.gen = s.nextGen()
	if !e.processing {
		s.enqueue(i)
	}
}

// enqueue puts ready entry i, not processing, in its lane.
func (s *store[T]) enqueue(i int32) {
	e := s.at(i)
	s.lanes.get(s.priority(e)).push(readyNode{slot: i, gen: e.gen})
}

// liveReady reports whether n is the live node of a ready entry not processing.
func (s *store[T]) liveReady(n readyNode) bool {
	e := s.at(n.slot)
	return e.queued == queuedReady && !e.processing && e.gen == n.gen
}

// liveWaiting reports whether n is the live node of a waiting entry.
func (s *store[T]) liveWaiting(n sched.Node) bool {
	e := s.at(n.Slot)
	return e.queued == queuedWaiting && e.gen == n.Gen && e.at == n.At
}

// head drops stale nodes from the top of the heap and returns the live top.
func (s *store[T]) head() (sched.Node, bool) {
	for len(s.heap) > 0 {
		if n := s.heap[0]; s.liveWaiting(n) {
			return n, true
		}
		s.heap.RemoveTop()
	}
	return sched.Node{}, false
}

// dropStaleIfMany compacts the heap once more than a quarter of it is
// stale: at most 4/3 nodes per waiting entry, O(1) amortised.
func (s *store[T]) dropStaleIfMany() {
	if stale := len(s.heap) - s.waiting; stale*4 > len(s.heap) {
		s.heap = slices.DeleteFunc(s.heap, func(n sched.Node) bool { return !s.liveWaiting(n) })
		s.heap.Heapify()
	}
}

// dropAll makes every waiting entry, and every ready one if ready too,
// queued for nothing, frees those not processing, and returns the number of
// ready entries dropped. O(n), with the heap and lanes dropped whole.
func (s *store[T]) dropAll(ready bool) int {
	dropped := 0
	for i := range int32(s.slab.Len()) {
		e := s.at(i)
		if e.queued != queuedWaiting && !(ready && e.queued == queuedReady) {
			continue
		}
		if e.queued == queuedReady {
			dropped++
			if s.ready--; e.processing {
				s.held--
			}
		}
		e.queued = queuedNone
		if !e.processing {
			_, pos := s.find(e.key, s.tag(e.key))
			s.release(i, pos)
		}
	}
	s.heap, s.waiting = nil, 0
	if ready {
		s.lanes = nil
	}
	s.shrink()
	return dropped
}

// minShrink is the slot count under which nothing shrinks: a few KiB.
const minShrink = 256

// shrink gives memory back once at most a quarter of the slab's slots hold
// an entry: it copies them, in order, to a slab of their size and renumbers
// the index, the heap and the lanes, dropping their stale nodes: O(n) after
// 3n/4 releases, with no shrink-grow cycle and no key hashed. Slot numbers
// change: the caller holds none across it.
func (s *store[T]) shrink() {
	used := s.slab.Len()
	if used <= minShrink || s.index.Len()*4 > used {
		return
	}
	old := s.slab
	moved := make([]int32, used) // old slot → new slot, or -1
	s.slab = sched.Slab[entry[T]]{}
	for j := range int32(used) {
		moved[j] = -1
		if e := old.At(j); e.queued != queuedNone || e.processing {
			moved[j] = s.slab.Alloc()
			*s.at(moved[j]) = *e
		}
	}
	s.index.Renumber(moved)
	heap := make(sched.Heap, 0, s.waiting)
	for _, n := range s.heap {
		if n.Slot = moved[n.Slot]; n.Slot >= 0 && s.liveWaiting(n) {
			heap = append(heap, n)
		}
	}
	s.heap = heap
	s.heap.Heapify()
	s.laneSlots(moved)
}
