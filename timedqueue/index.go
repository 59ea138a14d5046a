package timedqueue

import "hash/maphash"

// index maps each key with a live schedule to its slab slot. It replaces a
// map[K]int32 to save memory and time: an open-addressing table of 8-byte
// slots, each packing a 32-bit hash tag with the slot index + 1 (0 marks an
// empty slot), with linear probing and backward-shift deletion (no
// tombstones). The keys themselves stay in the slab: a probe compares tags and
// reads the slab only on a tag match.
//
// A key's home position is its tag masked to the table size, so the table
// is resized without hashing a key or touching the slab. It doubles when more
// than 3/4 full, and, unlike a Go map, shrinks when less than 3/16 full, to
// the size that makes it at most 3/8 full: between two resizes the number of
// keys at least doubles or halves, so resizing is O(1) amortised and a size
// hovering around a threshold does not make it resize again and again. At 1M
// keys it takes 16 MiB: 16 bytes per key.
//
// The hash is hash/maphash.Comparable with a seed per queue, so two queues do
// not share collision patterns. Like a Go map, it panics for a key holding a
// value that is not comparable: the queue refuses such keys first (see
// TimedWorkerQueue.badKey). A key that is not equal to itself (a NaN) is never
// found, as in a Go map.
//
// It is not safe for concurrent use; the queue's mutex guards it.
type index[K comparable] struct {
	slots []uint64 // tag<<32 | slab index+1; 0 is empty; len is a power of two or 0
	n     int      // occupied slots
	seed  maphash.Seed
}

// indexMinSize is the table size on first insert.
const indexMinSize = 16

func newIndex[K comparable]() index[K] {
	return index[K]{seed: maphash.MakeSeed()}
}

// tag returns key's hash tag.
func (x *index[K]) tag(key K) uint32 {
	return uint32(maphash.Comparable(x.seed, key) >> 32)
}

// len returns the number of keys.
func (x *index[K]) len() int { return x.n }

// find looks key up. If found, it returns its slab index and its table
// position; if not, i is -1 and pos is the empty position where key would be
// inserted without growth. tag is key's tag either way, for insertAt.
func (x *index[K]) find(slab *slab[K], key K) (i int32, pos uint32, tag uint32) {
	tag = x.tag(key)
	if len(x.slots) == 0 {
		return -1, 0, tag
	}
	mask := uint32(len(x.slots) - 1)
	for p := tag & mask; ; p = (p + 1) & mask {
		s := x.slots[p]
		if uint32(s) == 0 {
			return -1, p, tag
		}
		if uint32(s>>32) == tag {
			if j := int32(uint32(s) - 1); slab.at(j).key == key {
				return j, p, tag
			}
		}
	}
}

// insertAt adds slab index i for the key whose tag and missing position find
// has just returned, with no change to the index since.
func (x *index[K]) insertAt(pos, tag uint32, i int32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow()
		pos = x.emptyFor(tag)
	}
	x.slots[pos] = uint64(tag)<<32 | uint64(uint32(i)+1)
	x.n++
}

// emptyFor returns the first empty position on tag's probe sequence.
func (x *index[K]) emptyFor(tag uint32) uint32 {
	mask := uint32(len(x.slots) - 1)
	p := tag & mask
	for x.slots[p] != 0 {
		p = (p + 1) & mask
	}
	return p
}

// grow doubles the table.
func (x *index[K]) grow() {
	x.resize(max(indexMinSize, 2*len(x.slots)))
}

// resize re-places every slot by its tag in a table of size slots, a power
// of two large enough, or none if size is 0.
func (x *index[K]) resize(size int) {
	old := x.slots
	x.slots = nil
	if size > 0 {
		x.slots = make([]uint64, size)
	}
	for _, s := range old {
		if s != 0 {
			x.slots[x.emptyFor(uint32(s>>32))] = s
		}
	}
}

// shrink makes the table at most 3/8 full if it is less than 3/16 full;
// an empty index takes no table.
func (x *index[K]) shrink() {
	if len(x.slots) <= indexMinSize || x.n*16 >= len(x.slots)*3 {
		return
	}
	if x.n == 0 {
		x.resize(0)
		return
	}
	size := indexMinSize
	for x.n*8 > size*3 {
		size *= 2
	}
	x.resize(size)
}

// deleteAt removes the key at table position pos, as returned by find. Later
// slots of the same probe run move back into the hole, so that every key stays
// reachable from its home position without tombstones.
func (x *index[K]) deleteAt(pos uint32) {
	mask := uint32(len(x.slots) - 1)
	hole := pos
	for p := (pos + 1) & mask; ; p = (p + 1) & mask {
		s := x.slots[p]
		if s == 0 {
			break
		}
		// The key at p may move to the hole unless its home lies cyclically
		// in (hole, p]: then the hole is before its home.
		if home := uint32(s>>32) & mask; (p-home)&mask >= (p-hole)&mask {
			x.slots[hole] = s
			hole = p
		}
	}
	x.slots[hole] = 0
	x.n--
	x.shrink()
}

// repoint makes key point to slab index to. The entry must still be in the
// slot the index has for it.
func (x *index[K]) repoint(slab *slab[K], key K, to int32) {
	_, pos, tag := x.find(slab, key)
	x.slots[pos] = uint64(tag)<<32 | uint64(uint32(to)+1)
}

// retain keeps the keys whose slab index keep reports true and drops the
// others, in O(table size).
func (x *index[K]) retain(keep func(i int32) bool) {
	var kept []uint64
	for _, s := range x.slots {
		if s != 0 && keep(int32(uint32(s)-1)) {
			kept = append(kept, s)
		}
	}
	clear(x.slots)
	for _, s := range kept {
		x.slots[x.emptyFor(uint32(s>>32))] = s
	}
	x.n = len(kept)
	x.shrink()
}
