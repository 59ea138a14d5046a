package timedqueue

import (
	"context"
	"errors"
)

// Shutdown stops the queue: AddWork and UpdateWork return false, schedules
// not running are dropped and counted, running ones get their ctx cancelled
// and no retry. It returns nil once every work func has returned, or ctx.Err()
// if ctx ends first. From a work func, pass its ctx: it then does not wait for
// that work func, nor for others blocked in Shutdown likewise.
func (q *TimedWorkerQueue[K]) Shutdown(ctx context.Context) error {
	own := q.ownAttempt(ctx)
	var d delta
	dropped := 0
	q.mu.Lock()
	if !q.down.closed {
		q.down.closed = true
		s := &q.s
		for i := range int32(s.slab.len()) {
			if e := s.at(i); e.state != stateFree && e.state != stateRunning {
				if e.attempts > 0 {
					d.backoff--
				}
				_, pos, _ := s.index.find(&s.slab, e.key)
				s.remove(i, pos)
				dropped++
			}
		}
		s.heap, s.waiting = nil, 0
		s.shrink()
		q.alarm.disarm()
		close(q.alarm.stop)
		q.cancelBase(ErrShutdown)
		d.pending -= dropped
		d.drops += dropped
	}
	if own != nil {
		q.enterLocked(own)
	}
	q.mu.Unlock()
	q.m.apply(d)
	if dropped > 0 {
		q.log.Info("Shutdown dropped work that had not started", "count", dropped)
	}

	done := ctx.Done()
	q.mu.Lock()
	defer q.mu.Unlock()
	if own != nil {
		defer q.leaveLocked(own)
	}
	for {
		// A worker in a hook holds its slot but has no work func left to
		// wait for: the hook may be the caller. A caller inside a running
		// attempt skips its own and those of the other callers inside running
		// attempts (q.inside counts them all, its own included), which wait
		// for it as it would for them.
		busy := q.active - q.down.hooking
		if !q.alarm.running && (busy == 0 || own != nil && own.running && busy <= q.down.inside) {
			return nil
		}
		ch := q.down.changed
		q.mu.Unlock()
		select {
		case <-ch:
			q.mu.Lock()
		case <-done:
			q.mu.Lock()
			if own != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
				done = nil // a work ctx cancelled by this shutdown: keep waiting
				continue
			}
			return ctx.Err()
		}
	}
}

// shutdownState is what Shutdown and its waiters share, guarded by the
// queue's mutex.
type shutdownState struct {
	closed  bool
	inside  int           // running attempts whose work ctx is in Shutdown (see workCtx)
	hooking int           // workers in a hook: they hold a slot, Shutdown does not wait for them
	changed chan struct{} // after Shutdown: closed and replaced when a wait condition may have changed
}

// notifyLocked wakes Shutdown waiters after a change of their wait condition.
func (q *TimedWorkerQueue[K]) notifyLocked() {
	if q.down.closed {
		close(q.down.changed)
		q.down.changed = make(chan struct{})
	}
}
