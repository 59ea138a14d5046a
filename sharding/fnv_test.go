package sharding

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFNV1a32MatchesStdlib uses hash/fnv's New32a as the oracle.
func TestFNV1a32MatchesStdlib(t *testing.T) {
	keys := []string{"", "a", "node-1", "ip-10-0-0-1.ec2.internal", "ノード", "\x00\xff"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		b := make([]byte, r.IntN(64))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		keys = append(keys, string(b))
	}
	for _, k := range keys {
		h := fnv.New32a()
		h.Write([]byte(k))
		if got, want := fnv1a32(k), h.Sum32(); got != want {
			t.Fatalf("fnv1a32(%q) = %#x, want %#x", k, got, want)
		}
	}
}

func TestFNV1a32DoesNotAllocate(t *testing.T) {
	key := "ip-10-0-0-1.ec2.internal"
	if n := testing.AllocsPerRun(100, func() { _ = fnv1a32(key) }); n != 0 {
		t.Fatalf("fnv1a32 allocated %v times per run, want 0", n)
	}
}

func TestShardForBadCounts(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt} {
		if got := ShardFor("node-a", n); got != 0 {
			t.Errorf("ShardFor(node-a, %d) = %d, want 0", n, got)
		}
	}
	if got, want := ShardFor("node-a", math.MaxInt), ShardFor("node-a", MaxShards); got != want {
		t.Errorf("ShardFor(node-a, MaxInt) = %d, want %d (as MaxShards)", got, want)
	}
}
