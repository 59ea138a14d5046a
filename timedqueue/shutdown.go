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
	if !q.closed {
		q.closed = true
		q.s.idx.retain(func(i int32) bool {
			if q.s.at(i).state == stateRunning {
				return true
			}
			if q.s.at(i).attempts > 0 {
				d.backoff--
			}
			q.s.release(i)
			dropped++
			return false
		})
		q.s.clearWaiting()
		q.s.shrink()
		q.stopTimerLocked()
		close(q.stop)
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
		busy := q.active - q.hooking
		if !q.timerOn && (busy == 0 || own != nil && own.running && busy <= q.inside) {
			return nil
		}
		ch := q.changed
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

// notifyLocked wakes Shutdown waiters after a change of their wait condition.
func (q *TimedWorkerQueue[K]) notifyLocked() {
	if q.closed {
		close(q.changed)
		q.changed = make(chan struct{})
	}
}
