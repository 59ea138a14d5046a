package sharding

// stop runs after every worker and the retry loop returned: it closes every
// shard to adds and drops what was left.
func (d *Dispatcher[H, L]) stop() {
	var hq, hw []dropped[H]
	var lq, lw []dropped[L]
	for _, s := range d.shards {
		s.mu.Lock()
		s.closed = true
		q, w := s.hi.drain()
		hq, hw = append(hq, q...), append(hw, w...)
		q2, w2 := s.lo.drain()
		lq, lw = append(lq, q2...), append(lw, w2...)
		s.mu.Unlock()
	}
	d.retryMu.Lock()
	d.high.heap, d.low.heap = nil, nil
	d.dueHint.Store(noRetry)
	d.retryMu.Unlock()

	if n := len(hq) + len(hw) + len(lq) + len(lw); n > 0 {
		d.log.Info("Dropped items at shutdown", "count", n,
			"highQueued", len(hq), "highWaitingForRetry", len(hw),
			"lowQueued", len(lq), "lowWaitingForRetry", len(lw))
	}
	// All shards are closed first, so an OnDrop that adds again sees its
	// add dropped at once rather than queued.
	dropStopped(d, &d.high, hq, true)
	dropStopped(d, &d.high, hw, false)
	dropStopped(d, &d.low, lq, true)
	dropStopped(d, &d.low, lw, false)
}

func dropStopped[H, L, T comparable](d *Dispatcher[H, L], lane *dispatcherLane[H, L, T], items []dropped[T], queued bool) {
	for _, it := range items {
		if queued {
			lane.m.depth.Dec()
		} else {
			lane.m.backoff.Dec()
		}
		lane.m.stopped()
		d.reportDrop(lane.drop(it.item, it.attempts, ErrStopped))
	}
}
