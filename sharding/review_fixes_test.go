package sharding_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/sharding"
)

// Rule: New returns an error, never panics, for a Shards above MaxShards
// (a huge value used to panic in make or truncate to zero shards).
func TestNewRejectsTooManyShards(t *testing.T) {
	for _, n := range []int{sharding.MaxShards + 1, 1 << 32, 1e9, math.MaxInt} {
		cfg := newEnv().config()
		cfg.Shards = n
		var d *sharding.Dispatcher[string, string]
		var err error
		require.NotPanics(t, func() { d, err = sharding.New(cfg) }, "Shards=%d", n)
		assert.Nil(t, d)
		assert.EqualError(t, err, "sharding: Shards must be at most 65536, got "+itoa(n))
	}
	cfg := newEnv().config()
	cfg.Shards = sharding.MaxShards
	d, err := sharding.New(cfg)
	require.NoError(t, err)
	assert.Equal(t, 0, d.Len())
}

func itoa(n int) string { return fmt.Sprint(n) }
