package sharding

import "sync"

// shard is one worker's share of the items: its two lanes under one mutex,
// and the channel that wakes its worker. Shards share no lock, so one slow
// shard never slows another.
type shard[H, L comparable] struct {
	mu     sync.Mutex
	hi     lane[H]
	lo     lane[L]
	burst  int    // high items taken in a row while low items waited
	gen    uint64 // last retry generation handed out
	closed bool   // Run has drained the shard; adds are dropped

	// wake has capacity 1; adds do a non-blocking send after queueing, so
	// a pending wake-up is never lost and an add never blocks.
	wake chan struct{}

	_ [64]byte // keep hot shards off each other's cache lines
}

// pick chooses the lane the worker takes its next item from, and reports
// false if both are empty. High wins unless maxBurst > 0 and the worker has
// already taken maxBurst high items in a row while low items waited.
func (s *shard[H, L]) pick(maxBurst int) (Lane, bool) {
	hi, lo := s.hi.q.len(), s.lo.q.len()
	switch {
	case hi > 0 && (lo == 0 || maxBurst == 0 || s.burst < maxBurst):
		if lo > 0 {
			s.burst++
		} else {
			s.burst = 0
		}
		return LaneHigh, true
	case lo > 0:
		s.burst = 0
		return LaneLow, true
	}
	return 0, false
}

func (s *shard[H, L]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
