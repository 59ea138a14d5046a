package workqueue

import (
	"slices"
	"sort"

	"github.com/taintkit/taintkit/internal/sched"
)

// readyNode is a ready entry in a lane: its slot, and its gen when queued.
type readyNode struct {
	slot int32
	gen  uint32
}

// newer reports whether gen a was given after gen b, in serial-number
// arithmetic: right unless 2³¹ gens apart.
func newer(a, b uint32) bool { return int32(a-b) > 0 }

// A lane holds the ready entries of one priority that are not being
// processed, in the order their gens were given: when they became ready, or
// were added while processed. An entry made ready now goes to the back of
// fifo; one whose Done puts it back with an older gen goes to late, a heap
// by gen (its At is unused), so that it comes out in its turn. take
// compares fifo's front and late's top, and takes fifo's front by slicing
// it off, as client-go's queue does: the array behind is given back when an
// append outgrows it, and no take copies. Deletion is lazy: live counts the
// live nodes; stale ones are dropped when met, or all at once when they
// outnumber the live ones.
type lane struct {
	prio int
	fifo []readyNode // gens increasing
	late sched.Heap
	live int
}

// lanes are the lanes in decreasing priority. An empty lane stays for its
// next entry unless there are more than maxLanes.
type lanes []*lane

const maxLanes = 8

// find returns the position of prio's lane, or where it goes.
func (ls lanes) find(prio int) (int, bool) {
	i := sort.Search(len(ls), func(i int) bool { return ls[i].prio <= prio })
	return i, i < len(ls) && ls[i].prio == prio
}

// get returns prio's lane, made if there is none.
func (ls *lanes) get(prio int) *lane {
	i, ok := ls.find(prio)
	if !ok {
		*ls = slices.Insert(*ls, i, &lane{prio: prio})
	}
	return (*ls)[i]
}

func (l *lane) push(n readyNode) {
	if last := len(l.fifo) - 1; last < 0 || newer(n.gen, l.fifo[last].gen) {
		l.fifo = append(l.fifo, n)
	} else {
		l.late.Push(sched.Node{Slot: n.slot, Gen: n.gen})
	}
	l.live++
}

// stale returns the number of stale nodes.
func (l *lane) stale() int { return len(l.fifo) + len(l.late) - l.live }

// tidy gives back what l holds beyond its live nodes: all of it once none
// is live, and the stale nodes once they outnumber the live ones, in O(1)
// amortised.
func (l *lane) tidy(live func(readyNode) bool) {
	switch {
	case l.live == 0:
		l.fifo, l.late = trim(l.fifo[:0]), trim(l.late[:0])
	case l.stale() > max(l.live, 32):
		l.fifo = trim(slices.DeleteFunc(l.fifo, func(n readyNode) bool { return !live(n) }))
		l.late = trim(slices.DeleteFunc(l.late, func(n sched.Node) bool { return !live(readyNode{n.Slot, n.Gen}) }))
		l.late.Heapify()
	}
}

// trim returns s, or a copy of it that fits if s uses less than a quarter
// of a large array.
func trim[S ~[]E, E any](s S) S {
	if cap(s) <= 1024 || len(s)*4 > cap(s) {
		return s
	}
	if len(s) == 0 {
		return nil
	}
	return slices.Clip(append(S(nil), s...))
}

// take removes the first live node of the highest priority from its lane
// and returns its slot, still queuedReady, if there is one.
func (s *store[T]) take() (int32, bool) {
	for _, l := range s.lanes {
		if l.live == 0 {
			continue
		}
		for len(l.fifo) > 0 && !s.liveReady(l.fifo[0]) {
			l.fifo = l.fifo[1:]
		}
		for len(l.late) > 0 && !s.liveReady(readyNode{l.late[0].Slot, l.late[0].Gen}) {
			l.late.RemoveTop()
		}
		var i int32
		if len(l.late) > 0 && (len(l.fifo) == 0 || newer(l.fifo[0].gen, l.late[0].Gen)) {
			i = l.late[0].Slot
			l.late.RemoveTop()
		} else {
			i = l.fifo[0].slot
			l.fifo = l.fifo[1:]
		}
		l.live--
		s.tidy(l)
		return i, true
	}
	return -1, false
}

// leave records that a live node of prio's lane is going stale.
func (s *store[T]) leave(prio int) {
	i, _ := s.lanes.find(prio)
	l := s.lanes[i]
	l.live--
	s.tidy(l)
}

// tidy tidies l, and drops it if it is empty and there are many lanes.
func (s *store[T]) tidy(l *lane) {
	l.tidy(s.liveReady)
	if l.live == 0 && len(s.lanes) > maxLanes {
		i, _ := s.lanes.find(l.prio)
		s.lanes = slices.Delete(s.lanes, i, i+1)
	}
}

// laneSlots renumbers the lanes' slots after shrink moved the entries of
// slot j to moved[j], dropping stale nodes.
func (s *store[T]) laneSlots(moved []int32) {
	for _, l := range s.lanes {
		fifo := l.fifo[:0]
		for _, n := range l.fifo {
			if n.slot = moved[n.slot]; n.slot >= 0 && s.liveReady(n) {
				fifo = append(fifo, n)
			}
		}
		late := l.late[:0]
		for _, n := range l.late {
			if n.Slot = moved[n.Slot]; n.Slot >= 0 && s.liveReady(readyNode{n.Slot, n.Gen}) {
				late = append(late, n)
			}
		}
		l.fifo, l.late = fifo, late
		l.late.Heapify()
	}
}
