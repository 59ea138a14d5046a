package metricsauth

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// CacheSize is the most answers each of a filter's two caches (TokenReviews,
// SubjectAccessReviews) holds. A full cache makes room by dropping its
// expired answers, and if none has expired the one that expires first (of
// those, the oldest): a
// client sending many distinct tokens costs a review each, never memory
// without bound.
const CacheSize = 4096

// cacheKey is a SHA-256 digest: of the token for a TokenReview (the cache
// holds no token), of the review's spec for a SubjectAccessReview (the size
// of an entry does not grow with the request's path).
type cacheKey = [32]byte

// ttlCache holds answers for a time each, on a clock, up to max of them.
// It is safe for concurrent use.
type ttlCache[V any] struct {
	clock clock.PassiveClock
	max   int

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry[V]
	puts    uint64 // orders the entries that expire at the same time
}

type cacheEntry[V any] struct {
	value   V
	expires time.Time
	seq     uint64
}

func newTTLCache[V any](clk clock.PassiveClock, max int) *ttlCache[V] {
	return &ttlCache[V]{clock: clk, max: max, entries: map[cacheKey]cacheEntry[V]{}}
}

// get returns the answer for key if there is one that has not expired; an
// expired one is dropped.
func (c *ttlCache[V]) get(key cacheKey) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	if !c.clock.Now().Before(e.expires) {
		delete(c.entries, key)
		var zero V
		return zero, false
	}
	return e.value, true
}

// put holds value for key for ttl from now, in place of any answer key had.
func (c *ttlCache[V]) put(key cacheKey, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		c.makeRoom(now)
	}
	c.puts++
	c.entries[key] = cacheEntry[V]{value: value, expires: now.Add(ttl), seq: c.puts}
}

// makeRoom drops the expired entries and, if that frees nothing, the one
// that expires first, the oldest of those. It scans the whole cache: a full cache means a review
// per put, which costs far more than the scan.
func (c *ttlCache[V]) makeRoom(now time.Time) {
	var first cacheKey
	var firstEntry *cacheEntry[V]
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			continue
		}
		if firstEntry == nil || e.expires.Before(firstEntry.expires) ||
			(e.expires.Equal(firstEntry.expires) && e.seq < firstEntry.seq) {
			first, firstEntry = k, &e
		}
	}
	if len(c.entries) >= c.max {
		delete(c.entries, first)
	}
}

// len returns the number of entries held, expired ones included.
func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
