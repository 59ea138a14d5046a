package sched

import "hash/maphash"

// Index maps keys to slab slots: an open-addressing table of 8-byte slots,
// each a 32-bit hash tag and the slot number + 1 (0 is empty), with linear
// probing and backward-shift deletion (no tombstones). Keys stay in the
// slab: the Index holds no key, and its caller compares the keys of the
// slots whose tag matches (see Lookup). It takes 16 bytes per key at 1M keys,
// where a map[string]int32 takes 40 to 56.
//
// A key's home is its tag masked to the table size, so a resize neither
// hashes a key nor reads the slab. The table doubles when more than 3/4
// full; Reset sizes it anew.
//
// A find by key, given keyAt(slot) and the key's Tag:
//
//	pos, slot := x.Lookup(tag)
//	for slot >= 0 && keyAt(slot) != key {
//		pos, slot = x.Next(pos, tag)
//	}
//
// leaves slot −1 and pos where Insert puts the key if it is absent.
type Index struct {
	slots []uint64 // tag<<32 | slot+1; 0 is empty; len is a power of two or 0
	n     int      // occupied slots
}

// indexMinSize is the table size on first insert.
const indexMinSize = 16

// Tag returns key's hash tag under seed. Like a Go map, it panics for a key
// that is not comparable at run time (an interface holding a slice).
func Tag[K comparable](seed maphash.Seed, key K) uint32 {
	return uint32(maphash.Comparable(seed, key) >> 32)
}

// Len returns the number of keys.
func (x *Index) Len() int { return x.n }

// Size returns the number of table positions, for footprints.
func (x *Index) Size() int { return len(x.slots) }

// Lookup returns the first position on tag's probe sequence that is empty
// (slot −1) or holds tag (its slot, whose key the caller compares).
func (x *Index) Lookup(tag uint32) (pos uint32, slot int32) {
	if len(x.slots) == 0 {
		return 0, -1
	}
	return x.scan(tag&uint32(len(x.slots)-1), tag)
}

// Next continues Lookup after pos, which held tag with another key.
func (x *Index) Next(pos, tag uint32) (uint32, int32) {
	return x.scan((pos+1)&uint32(len(x.slots)-1), tag)
}

func (x *Index) scan(p, tag uint32) (uint32, int32) {
	mask := uint32(len(x.slots) - 1)
	for ; ; p = (p + 1) & mask {
		s := x.slots[p]
		if uint32(s) == 0 {
			return p, -1
		}
		if uint32(s>>32) == tag {
			return p, int32(uint32(s) - 1)
		}
	}
}

// Insert adds slot with tag at pos, the empty position a Lookup for tag has
// just ended on.
func (x *Index) Insert(pos, tag uint32, slot int32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(max(indexMinSize, 2*len(x.slots)))
		pos = x.emptyFor(tag)
	}
	x.slots[pos] = uint64(tag)<<32 | uint64(uint32(slot)+1)
	x.n++
}

// emptyFor returns the first empty position on tag's probe sequence.
func (x *Index) emptyFor(tag uint32) uint32 {
	mask := uint32(len(x.slots) - 1)
	p := tag & mask
	for x.slots[p] != 0 {
		p = (p + 1) & mask
	}
	return p
}

// resize re-places every slot in a table of size positions (0 or a power of two).
func (x *Index) resize(size int) {
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

// Reset empties the table and sizes it for n keys, at most 3/8 full.
func (x *Index) Reset(n int) {
	x.slots, x.n = nil, 0
	x.resize(sizeFor(n))
}

// sizeFor returns the table size for n keys, at most 3/8 full.
func sizeFor(n int) int {
	size := 0
	for size*3 < n*8 {
		size = max(indexMinSize, 2*size)
	}
	return size
}

// Renumber makes every slot j the table holds moved[j], as after the slab's
// entries moved, and sizes the table for its keys as Reset does: O(n), with
// no key hashed or read.
func (x *Index) Renumber(moved []int32) {
	for p, s := range x.slots {
		if s != 0 {
			x.slots[p] = s&^(1<<32-1) | uint64(uint32(moved[uint32(s)-1])+1)
		}
	}
	x.resize(sizeFor(x.n))
}

// Delete removes the key at pos, where a Lookup found it. Later keys of the
// probe run move back into the hole, so that each stays reachable from its
// home.
func (x *Index) Delete(pos uint32) {
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
