package timedqueue

import (
	"context"
	"errors"
	"time"
)

// Shutdown stops the queue: AddWork and UpdateWork return false, schedules
// not running are dropped and counted, running ones get their ctx cancelled
// and no retry. It returns nil once every work func has returned, or ctx.Err()
// if ctx ends first. From a work func, pass its ctx: it then does not wait for
// that work func, nor for others blocked in Shutdown likewise.
func (q *TimedWorkerQueue[K]) Shutdown(ctx context.Context) error {
	own, _ := ctx.Value(q).(*workCtx[K]) // the caller's attempt, if it has one
	var d delta
	dropped := 0
	q.mu.Lock()
	if !q.down.closed {
		q.down.closed = true
		s := &q.s
		for i := range int32(s.slab.Len()) {
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
		q.alarm.Disarm()
		close(q.alarm.stop)
		q.cancelBase(ErrShutdown)
		d.pending -= dropped
		d.drops += dropped
	}
	if own != nil {
		q.shutdownCallLocked(own, 1)
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
		defer q.shutdownCallLocked(own, -1)
	}
	for {
		// A worker in a hook has no work func left to wait for: the hook may
		// be the caller. A caller inside a running attempt does not wait for
		// the attempts of callers inside running attempts (q.down.inside,
		// its own included), which do not wait for it either.
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

// shutdownState is what Shutdown and its waiters share, guarded by q.mu.
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

// workCtx is the ctx of one attempt's work func, and the attempt's identity,
// carried under the key q. Shutdown called with it, or a ctx derived from it,
// does not wait for the attempt while running is true: the caller is that
// work func or a goroutine it waits for. A ctx may be kept after its work func
// returned: each attempt has a workCtx of its own. With a timeout the work
// func gets a timedCtx around it.
type workCtx[K comparable] struct {
	context.Context
	q *TimedWorkerQueue[K]
	// Guarded by q.mu.
	running   bool  // the work func has not returned
	shutdowns int32 // Shutdown calls in progress with this ctx
}

func (c *workCtx[K]) Value(key any) any {
	if key == any(c.q) {
		return c
	}
	return c.Context.Value(key)
}

// timedCtx is the work ctx of an attempt with a timeout: its workCtx's
// Context is a child of the base ctx, cancelled at the deadline by the queue.
type timedCtx[K comparable] struct {
	*workCtx[K]
	deadline moment
}

func (c *timedCtx[K]) Deadline() (time.Time, bool) { return c.deadline.time(time.Local), true }

// Err reports context.DeadlineExceeded when the attempt timed out: the queue
// cancels the attempt with that cause from its own timer.
func (c *timedCtx[K]) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// shutdownCallLocked records that a Shutdown call made with c's ctx began
// (n = 1) or returned (n = -1). q.down.inside counts the running attempts
// with a Shutdown call in progress through their ctx, each once: it changes
// only here and in settle.
func (q *TimedWorkerQueue[K]) shutdownCallLocked(c *workCtx[K], n int32) {
	c.shutdowns += n
	if first, last := n > 0 && c.shutdowns == 1, n < 0 && c.shutdowns == 0; c.running && (first || last) {
		q.down.inside += int(n)
		q.notifyLocked()
	}
}
