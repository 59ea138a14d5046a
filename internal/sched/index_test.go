package sched

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyed is an Index over keys held in a slab, found as the Index's doc says.
type keyed[K comparable] struct {
	x    Index
	slab Slab[K]
	seed maphash.Seed
}

func (k *keyed[K]) find(key K) (slot int32, pos, tag uint32) {
	tag = Tag(k.seed, key)
	pos, slot = k.x.Lookup(tag)
	for slot >= 0 && *k.slab.At(slot) != key {
		pos, slot = k.x.Next(pos, tag)
	}
	return slot, pos, tag
}

// check verifies the table: a power-of-two size at most 3/4 full, each
// occupied position reachable from its home with no empty position
// between, no slot twice, and the count.
func (x *Index) check() error {
	if len(x.slots)&(len(x.slots)-1) != 0 {
		return fmt.Errorf("index size %d is not a power of two", len(x.slots))
	}
	if x.n*4 > len(x.slots)*3 {
		return fmt.Errorf("index holds %d keys in %d positions", x.n, len(x.slots))
	}
	mask := uint32(len(x.slots) - 1)
	n := 0
	seen := map[uint32]bool{}
	for p, s := range x.slots {
		if s == 0 {
			continue
		}
		n++
		if seen[uint32(s)] {
			return fmt.Errorf("slot %d indexed twice", uint32(s)-1)
		}
		seen[uint32(s)] = true
		tag := uint32(s >> 32)
		for h := tag & mask; h != uint32(p); h = (h + 1) & mask {
			if x.slots[h] == 0 {
				return fmt.Errorf("position %d (home %d) unreachable: empty position %d", p, tag&mask, h)
			}
		}
	}
	if n != x.n {
		return fmt.Errorf("index counts %d keys, holds %d", x.n, n)
	}
	return nil
}

// indexModel drives an Index and a Go map with the same random inserts,
// deletes and lookups and compares them, checking the table as it goes.
func indexModel[K comparable](t *testing.T, seed uint64, ops, nkeys int, newKey func(int) K) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	k := keyed[K]{seed: maphash.MakeSeed()}
	model := map[K]int32{}
	for op := range ops {
		key := newKey(rng.IntN(nkeys))
		want, in := model[key]
		got, pos, tag := k.find(key)
		require.Equal(t, in, got >= 0, "op %d: find(%v)", op, key)
		if in {
			require.Equal(t, want, got, "op %d: find(%v)", op, key)
		}
		switch r := rng.IntN(10); {
		case !in && r < 6:
			i := k.slab.Alloc()
			*k.slab.At(i) = key
			k.x.Insert(pos, tag, i)
			model[key] = i
		case in && r < 5:
			k.x.Delete(pos)
			k.slab.Free(got)
			delete(model, key)
		}
		require.Equal(t, len(model), k.x.Len())
		if op%1009 == 0 || op == ops-1 {
			require.NoError(t, k.x.check(), "op %d", op)
		}
	}
	for key, i := range model {
		got, _, _ := k.find(key)
		require.Equal(t, i, got)
	}
	k.x.Reset(len(model) / 2)
	require.NoError(t, k.x.check())
	assert.Zero(t, k.x.Len())
}

func TestIndexAgainstMap(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("int/seed=", seed), func(t *testing.T) {
			// Few keys: the table stays small, probe runs wrap around its end.
			indexModel(t, seed, 20_000, 40, func(i int) int { return i })
		})
		t.Run(fmt.Sprint("string/seed=", seed), func(t *testing.T) {
			indexModel(t, seed, 20_000, 3000, func(i int) string { return fmt.Sprint("ns/pod-", i) })
		})
	}
}

func TestIndexResetSizes(t *testing.T) {
	for _, n := range []int{0, 1, 6, 7, 100, 1000} {
		var x Index
		x.Reset(n)
		assert.GreaterOrEqual(t, x.Size()*3, n*8, "Reset(%d): %d positions", n, x.Size())
		assert.LessOrEqual(t, x.Size()*3, max(16*3, n*16), "Reset(%d): %d positions", n, x.Size())
	}
}

// TestIndexBackwardShiftWraps places hand-made tags in a table of 16 so that
// probe runs cross its end and deletions shift keys back across it, then
// checks that every remaining key is still reachable from its home.
func TestIndexBackwardShiftWraps(t *testing.T) {
	homes := []uint32{14, 14, 15, 15, 14, 0, 1, 13, 15, 2, 0} // 11 keys: load < 3/4 of 16
	for del := range homes {
		var x Index
		x.slots = make([]uint64, 16)
		pos := map[int]uint32{}
		for i, h := range homes {
			tag := uint32(i)<<8 | h // distinct tags, chosen homes
			x.Insert(x.emptyFor(tag), tag, int32(i))
			require.Len(t, x.slots, 16, "no growth")
		}
		for p, s := range x.slots {
			if s != 0 {
				pos[int(uint32(s)-1)] = uint32(p)
			}
		}
		x.Delete(pos[del])
		require.Equal(t, len(homes)-1, x.n)
		require.NoError(t, x.check())
		for i, h := range homes {
			tag := uint32(i)<<8 | h
			found := false
			for p, s := x.Lookup(tag); s >= 0; p, s = x.Next(p, tag) {
				if s == int32(i) {
					found = true
					break
				}
			}
			assert.Equal(t, i != del, found, "delete %d: key %d (home %d) found", del, i, h)
		}
	}
}

func TestIndexRenumber(t *testing.T) {
	k := keyed[int]{seed: maphash.MakeSeed()}
	for key := range 1000 {
		_, pos, tag := k.find(key)
		i := k.slab.Alloc()
		*k.slab.At(i) = key
		k.x.Insert(pos, tag, i)
	}
	// Keep every 10th key, moved to a dense slab.
	var dense Slab[int]
	moved := make([]int32, k.slab.Len())
	for key := range 1000 {
		i, pos, _ := k.find(key)
		if key%10 != 0 {
			k.x.Delete(pos)
			continue
		}
		moved[i] = dense.Alloc()
		*dense.At(moved[i]) = key
	}
	size := k.x.Size()
	k.x.Renumber(moved)
	k.slab = dense
	require.NoError(t, k.x.check())
	assert.Less(t, k.x.Size(), size, "sized for what is left")
	for key := range 1000 {
		i, _, _ := k.find(key)
		if key%10 == 0 {
			assert.Equal(t, key, *k.slab.At(i))
		} else {
			assert.Equal(t, int32(-1), i)
		}
	}
}
