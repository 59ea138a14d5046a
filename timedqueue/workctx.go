package timedqueue

import (
	"context"
	"time"
)

// workCtxKey is the context key under which a work ctx carries itself, so that
// Shutdown can tell which attempt, if any, its caller belongs to.
type workCtxKey struct{}

// workCtx is the ctx handed to one attempt's work func, and that attempt's
// identity. Shutdown called with it, or with a ctx derived from it, skips
// waiting for this attempt while running is true: its caller is then that
// work func or a goroutine it waits for. Once the work func has returned, the
// ctx stands for no attempt: a goroutine that outlives its work func, or a
// later attempt's, must not make Shutdown skip anything.
//
// So each attempt needs a workCtx of its own, never reused: a ctx may be kept
// after its work func returned. Without an attempt timeout it is all the
// attempt allocates; its parent is the queue's base ctx, so no cancel func,
// no registration with the parent. With a timeout the work func gets a
// timedCtx around it.
type workCtx[K comparable] struct {
	context.Context
	q *TimedWorkerQueue[K]
	// Guarded by q.mu.
	running   bool  // the work func has not returned
	shutdowns int32 // Shutdown calls in progress with this ctx
}

func (c *workCtx[K]) Value(key any) any {
	if key == (workCtxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// timedCtx is the work ctx of an attempt with a timeout: its workCtx's
// Context is a child of the base ctx that the queue cancels at the deadline,
// on its own clock.
type timedCtx[K comparable] struct {
	*workCtx[K]
	deadline moment
}

func (c *timedCtx[K]) Deadline() (time.Time, bool) {
	return c.deadline.time(time.Local), true
}

// Err reports context.DeadlineExceeded when the attempt timed out: the queue
// cancels the attempt with that cause from its own timer.
func (c *timedCtx[K]) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// ownAttempt returns the attempt ctx carries, if it belongs to q.
func (q *TimedWorkerQueue[K]) ownAttempt(ctx context.Context) *workCtx[K] {
	if c, ok := ctx.Value(workCtxKey{}).(*workCtx[K]); ok && c.q == q {
		return c
	}
	return nil
}

// returnedLocked records that the work func of c has returned.
//
// q.down.inside counts the running attempts with at least one Shutdown call in
// progress through their ctx: each such attempt once, however many goroutines
// share its ctx. It changes only here and in enterLocked and leaveLocked.
func (q *TimedWorkerQueue[K]) returnedLocked(c *workCtx[K]) {
	c.running = false
	if c.shutdowns > 0 {
		q.down.inside--
		q.notifyLocked()
	}
}

// enterLocked records a Shutdown call made with c's ctx.
func (q *TimedWorkerQueue[K]) enterLocked(c *workCtx[K]) {
	c.shutdowns++
	if c.shutdowns == 1 && c.running {
		q.down.inside++
	}
}

// leaveLocked records the return of a Shutdown call made with c's ctx.
func (q *TimedWorkerQueue[K]) leaveLocked(c *workCtx[K]) {
	c.shutdowns--
	if c.shutdowns == 0 && c.running {
		q.down.inside--
		q.notifyLocked()
	}
}
