package sharding

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRingFollowsModel checks ring against a slice FIFO under random pushes
// and pops, and that its buffer shrinks back as it empties.
func TestRingFollowsModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var q ring[int]
	var model []int
	next := 0
	for round := range 4 {
		// Grow to ~10k, then drain, with noise.
		for q.len() < 10_000 {
			if r.IntN(4) == 0 && q.len() > 0 {
				require.Equal(t, model[0], q.pop())
				model = model[1:]
			} else {
				q.push(next)
				model = append(model, next)
				next++
			}
		}
		for q.len() > 0 {
			if r.IntN(4) == 0 {
				q.push(next)
				model = append(model, next)
				next++
			}
			require.Equal(t, model[0], q.pop(), "round %d", round)
			model = model[1:]
		}
		assert.LessOrEqual(t, len(q.buf), keepRing, "buffer did not shrink")
	}
}

// A ring whose length goes between a few items and a few more (a worker
// keeping up with its adds) must not allocate a buffer every few operations.
func TestRingSmallHoverDoesNotAllocate(t *testing.T) {
	var q ring[int]
	for i := range 100 {
		q.push(i)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range 10 {
			q.push(i)
		}
		for range 10 {
			q.pop()
		}
		for q.len() > 3 {
			q.pop()
		}
		for q.len() < 12 {
			q.push(0)
		}
	})
	assert.Zero(t, allocs)
}
