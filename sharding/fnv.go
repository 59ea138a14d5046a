package sharding

// FNV-1a, 32-bit (http://www.isthe.com/chongo/tech/comp/fnv/). The constants
// are the published offset basis and prime.
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// fnv1a32 returns the 32-bit FNV-1a hash of key. It ranges over the bytes of
// the string directly, so it never allocates; it equals hash/fnv's New32a
// applied to []byte(key).
func fnv1a32(key string) uint32 {
	h := uint32(fnvOffset32)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= fnvPrime32
	}
	return h
}

// ShardFor returns the shard, in [0, shards), that a dispatcher with that
// many shards routes key to: the 32-bit FNV-1a hash of key modulo shards, the
// same in every process. Shards above MaxShards count as MaxShards; it
// returns 0 if shards < 1.
func ShardFor(key string, shards int) int {
	if shards < 1 {
		return 0
	}
	return int(fnv1a32(key) % uint32(min(shards, MaxShards)))
}
