package sharding

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPickHonoursPriorityAndBurst drives one shard's lanes with random adds
// and picks, as workLoop does under the shard's mutex, and checks each pick
// against the contract: a high item whenever one is queued, except that after
// MaxHighBurst high items in a row while low items waited, one low item.
func TestPickHonoursPriorityAndBurst(t *testing.T) {
	for _, burst := range []int{0, 1, 3} {
		r := rand.New(rand.NewPCG(uint64(burst), 7))
		var s shard[int, int]
		inARow, next, lows := 0, 0, 0
		for range 20_000 {
			if r.IntN(2) == 0 {
				next++
				if r.IntN(3) == 0 {
					s.hi.add(next)
				} else {
					s.lo.add(next)
				}
				continue
			}
			high, low := s.hi.q.len(), s.lo.q.len()
			picked, ok := s.pick(burst)
			require.Equal(t, high+low > 0, ok, "pick with %d high, %d low queued", high, low)
			switch {
			case !ok:
			case picked == LaneHigh:
				require.Positive(t, high)
				if low > 0 {
					require.False(t, burst > 0 && inARow >= burst, "burst %d: high item %d in a row while low items waited", burst, inARow+1)
					inARow++
				} else {
					inARow = 0
				}
				s.hi.pop()
			default:
				require.Positive(t, low)
				require.False(t, high > 0 && (burst == 0 || inARow < burst), "burst %d: a low item with %d high queued after %d high in a row", burst, high, inARow)
				inARow = 0
				lows++
				s.lo.pop()
			}
		}
		assert.Greater(t, lows, 100, "burst %d: low items were picked", burst)
	}
}
