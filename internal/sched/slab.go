package sched

// A Slab holds entries of type E in pages of slabPage entries, each at a
// stable slot number until freed: it grows a page at a time, with no copy of
// the whole slab. The first page doubles from 8 entries, so that a small
// queue stays small. Freed slots are reused last-freed first. The zero Slab
// is empty and ready to use.
type Slab[E any] struct {
	pages [][]E // each of slabPage entries, but the first while it grows
	n     int32 // allocated slots
	free  []int32
}

// slabShift sets slabPage: 1024 entries, a multiple of 8 KiB for an entry of
// 8-byte alignment, which Go allocates with no rounding and no header.
const (
	slabShift = 10
	slabPage  = 1 << slabShift
	slabMask  = slabPage - 1
)

// At returns slot i, which must be allocated.
func (sl *Slab[E]) At(i int32) *E { return &sl.pages[i>>slabShift][i&slabMask] }

// Len returns the number of allocated slots, free or not: slots are [0, Len).
func (sl *Slab[E]) Len() int { return int(sl.n) }

// Alloc returns a zeroed slot: the last one freed, or a new one.
func (sl *Slab[E]) Alloc() int32 {
	if n := len(sl.free); n > 0 {
		i := sl.free[n-1]
		sl.free = sl.free[:n-1]
		return i
	}
	i := sl.n
	switch p := int(i >> slabShift); {
	case p == len(sl.pages):
		size := slabPage
		if p == 0 {
			size = 8
		}
		sl.pages = append(sl.pages, make([]E, size))
	case p == 0 && int(i) == len(sl.pages[0]):
		sl.pages[0] = append(sl.pages[0], make([]E, min(len(sl.pages[0]), slabPage-len(sl.pages[0])))...)
	}
	sl.n++
	return i
}

// Free zeroes slot i, so that what its entry referenced can be collected, and
// makes it the next Alloc's.
func (sl *Slab[E]) Free(i int32) {
	var zero E
	*sl.At(i) = zero
	sl.free = append(sl.free, i)
}

// Footprint returns the slab's pages and the capacity of its free list.
func (sl *Slab[E]) Footprint() (pages, free int) { return len(sl.pages), cap(sl.free) }
