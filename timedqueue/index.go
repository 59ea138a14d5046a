package timedqueue

import (
	"hash/maphash"

	"github.com/taintkit/taintkit/internal/sched"
)

// index maps each key with a live schedule to its slab slot: a [sched.Index]
// (16 bytes per key at 1M keys; keys stay in the slab) and the queue's hash
// seed. Like a Go map, hashing panics for an uncomparable key (see badKey).
type index[K comparable] struct {
	sched.Index
	seed maphash.Seed
}

// find returns key's slab slot and table position, or -1 and the empty
// position where Insert puts it; and key's tag.
func (x *index[K]) find(slab *sched.Slab[entry[K]], key K) (i int32, pos uint32, tag uint32) {
	tag = sched.Tag(x.seed, key)
	pos, i = x.Lookup(tag)
	for i >= 0 && slab.At(i).key != key {
		pos, i = x.Next(pos, tag)
	}
	return i, pos, tag
}
