package timedqueue

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// indexModel drives an index and a Go map with the same random inserts,
// deletes and lookups and compares them, checking the index's invariants as
// it goes. Keys come from newKey(0..nkeys-1).
func indexModel[K comparable](t *testing.T, seed uint64, ops, nkeys int, newKey func(int) K) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := newStore[K]()
	model := map[K]int32{}
	for op := range ops {
		k := newKey(rng.IntN(nkeys))
		want, in := model[k]
		got, ok := get(&s, k)
		require.Equal(t, in, ok, "op %d: get(%v) found", op, k)
		if in {
			require.Equal(t, want, got, "op %d: get(%v)", op, k)
		}
		switch r := rng.IntN(10); {
		case !in && r < 6: // insert
			i := insertKey(&s, k)
			s.at(i).state = stateWaiting
			model[k] = i
		case in && r < 5: // delete
			require.True(t, deleteKey(&s, k))
			delete(model, k)
		case !in:
			require.False(t, deleteKey(&s, k), "delete of an absent key")
		}
		require.Equal(t, len(model), s.index.Len())
		if op%1009 == 0 || op == ops-1 {
			require.NoError(t, s.index.check(&s.slab), "op %d", op)
		}
	}
	// Every key of the model is there.
	for k, i := range model {
		got, ok := get(&s, k)
		require.True(t, ok)
		require.Equal(t, i, got)
	}
}

func get[K comparable](s *store[K], key K) (int32, bool) {
	i, _, _ := s.index.find(&s.slab, key)
	return i, i >= 0
}

// insertKey adds a schedule for key, which must be absent, and returns its slot.
func insertKey[K comparable](s *store[K], key K) int32 {
	_, pos, tag := s.index.find(&s.slab, key)
	return s.add(key, pos, tag, time.Time{}, time.Time{})
}

// deleteKey removes key's schedule and reports whether it was there.
func deleteKey[K comparable](s *store[K], key K) bool {
	i, pos, _ := s.index.find(&s.slab, key)
	if i >= 0 {
		s.remove(i, pos)
	}
	return i >= 0
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
		t.Run(fmt.Sprint("any/seed=", seed), func(t *testing.T) {
			// Interface keys: equal dynamic values are the same key, different
			// dynamic types are not.
			indexModel(t, seed, 10_000, 500, func(i int) any {
				switch i % 3 {
				case 0:
					return i
				case 1:
					return fmt.Sprint(i)
				}
				return [2]int{i, -i}
			})
		})
	}
}

func TestIndexNaNKeyIsNeverFound(t *testing.T) {
	// As in a Go map: a key not equal to itself can be inserted, never found.
	s := newStore[float64]()
	for range 3 {
		s.at(insertKey(&s, math.NaN())).state = stateWaiting
	}
	_, ok := get(&s, math.NaN())
	assert.False(t, ok)
	assert.Equal(t, 3, s.index.Len())
}
