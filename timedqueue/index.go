package timedqueue

import "hash/maphash"

// index maps each key with a live schedule to its slab slot: an
// open-addressing table of 8-byte slots, each a 32-bit hash tag and the slot
// index + 1 (0 is empty), with linear probing and backward-shift deletion (no
// tombstones). Keys stay in the slab, read on a tag match only. It takes 16
// bytes per key at 1M keys, where a map[string]int32 takes 40 to 56.
//
// A key's home is its tag masked to the table size, so a resize neither
// hashes a key nor reads the slab. The table doubles when more than 3/4 full;
// store.shrink sizes it anew. The hash is maphash.Comparable, seeded per
// queue: like a Go map, it panics for an uncomparable key (see badKey).
type index[K comparable] struct {
	slots []uint64 // tag<<32 | slab index+1; 0 is empty; len is a power of two or 0
	n     int      // occupied slots
	seed  maphash.Seed
}

// indexMinSize is the table size on first insert.
const indexMinSize = 16

// tag returns key's hash tag.
func (x *index[K]) tag(key K) uint32 { return uint32(maphash.Comparable(x.seed, key) >> 32) }

// find returns key's slab index and table position, or -1 and the empty
// position where insertAt puts it; and key's tag.
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

// insertAt adds slab index i at the position and tag find has just returned.
func (x *index[K]) insertAt(pos, tag uint32, i int32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(max(indexMinSize, 2*len(x.slots)))
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

// resize re-places every slot in a table of size slots (0 or a power of two).
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

// reset empties the table and sizes it for n keys, at most 3/8 full.
func (x *index[K]) reset(n int) {
	x.slots, x.n = nil, 0
	size := 0
	for size*3 < n*8 {
		size = max(indexMinSize, 2*size)
	}
	x.resize(size)
}

// deleteAt removes the key at position pos. Later keys of the probe run move
// back into the hole, so that each stays reachable from its home.
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
}
