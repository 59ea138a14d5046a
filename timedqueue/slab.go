package timedqueue

// slab holds the entries of a store in pages of slabPage entries, so that it
// grows one page at a time: no copy of the whole slab, and at most one page
// unused. Only the first page grows by doubling, from a few entries, so that
// a small queue stays small. Slots [0, len) are allocated, free or not.
type slab[K comparable] struct {
	pages [][]entry[K] // each of slabPage entries, but the first while it grows
	n     int32        // allocated slots
}

// slabShift sets slabPage: 1024 entries, 64 KiB for a string key. With a key
// of 8-byte alignment (a string, an int, a pointer) a page is a multiple of
// 8 KiB, which the Go allocator serves as a large object with no rounding and
// no header; a smaller page would be a small object with pointers, with an
// 8-byte header, rounded up to its size class.
const (
	slabShift = 10
	slabPage  = 1 << slabShift
	slabMask  = slabPage - 1
)

// at returns slot i, which must be allocated.
func (sl *slab[K]) at(i int32) *entry[K] {
	return &sl.pages[i>>slabShift][i&slabMask]
}

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
		// The first page doubles up to slabPage.
		sl.pages[0] = append(sl.pages[0], make([]entry[K], min(len(sl.pages[0]), slabPage-len(sl.pages[0])))...)
	}
	sl.n++
	return i
}

// truncate drops every slot from n on, which must all be free, and gives
// back the pages above them and, if it is larger than needed, the first page.
func (sl *slab[K]) truncate(n int) {
	pages := (n + slabPage - 1) >> slabShift
	clear(sl.pages[pages:])
	sl.pages = sl.pages[:pages]
	if cap(sl.pages) > 4*pages+4 {
		sl.pages = append([][]entry[K](nil), sl.pages...)
	}
	if pages == 1 && n*4 < len(sl.pages[0]) {
		sl.pages[0] = append(make([]entry[K], 0, max(8, 2*n)), sl.pages[0][:n]...)
		sl.pages[0] = sl.pages[0][:cap(sl.pages[0])]
	}
	sl.n = int32(n)
}
