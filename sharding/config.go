package sharding

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// DefaultShards is the number of shards, and so of workers, when
// Config.Shards is zero. It matches the taint manager's eight workers.
const DefaultShards = 8

// MaxShards is the largest Config.Shards New accepts. Every shard costs a
// worker goroutine and its queues, so more shards than this would only waste
// memory; larger values make New fail.
const MaxShards = 1 << 16

// Config configures a [Dispatcher]. HighKey, LowKey, HandleHigh and
// HandleLow are required; every other field has a usable zero value, stated
// on the field.
type Config[H, L comparable] struct {
	// Shards is the number of shards, each served by one worker goroutine.
	// Zero means DefaultShards; negative values and values above MaxShards
	// make New fail.
	Shards int

	// HighKey returns the shard key of a high-priority item, LowKey that of
	// a low-priority item. Items with equal shard keys go to the same shard
	// and are never handled at the same time (in the taint manager a pod's
	// key is its node's name, so a node and its pods never race). They are
	// called by AddHigh and AddLow on the caller's goroutine and should be
	// fast; a panic in them is recovered and the item dropped and reported.
	//
	// Each must return the same key for equal items for the dispatcher's
	// whole lifetime: an item whose key changes can sit in two shards at
	// once and then be handled concurrently with itself. If an item's key
	// can change (a pod moving to another node), make the key part of the
	// item.
	HighKey func(H) string
	LowKey  func(L) string

	// HandleHigh and HandleLow handle one item. They run on the shard's
	// worker goroutine, with no lock of the dispatcher held, so they may call
	// AddHigh and AddLow. ctx is cancelled when Run's context is done. A
	// non-nil error, or a panic (recovered and logged with its stack), is a
	// failure and is retried as Retry says.
	HandleHigh func(ctx context.Context, item H) error
	HandleLow  func(ctx context.Context, item L) error

	// Clock is the source of time for retry backoffs and handler latency.
	// Nil means clock.RealClock{}.
	Clock clock.Clock

	// Retry says when a failed item is tried again and when it is given up.
	// The zero value means DefaultMaxAttempts attempts, backing off from
	// DefaultInitialBackoff up to DefaultMaxBackoff.
	Retry RetryPolicy

	// MaxHighBurst bounds how long low items can starve. Zero means strict
	// priority, the original's semantics: a worker never takes a low item
	// while a high one is queued for its shard. N > 0 lets a worker, after
	// it took N high items in a row while low items were waiting, take one
	// low item before going on. Negative values make New fail.
	MaxHighBurst int

	// Logger receives the dispatcher's logs: failures (V(2)), panics and
	// drops (errors), the number of items dropped at shutdown. Nil means
	// klog.Background(); a given logger is used as is, so &logr.Discard()
	// silences the dispatcher.
	Logger *logr.Logger

	// Metrics creates the per-lane metrics when New runs. Nil means no
	// metrics.
	Metrics MetricsProvider

	// OnDrop, if not nil, is called once for every item the dispatcher
	// accepted and then gave up on, with the reason in Drop.Err: on the
	// shard's worker after the item's last failed attempt, and on the
	// goroutine running Run for the items still queued or waiting for a
	// retry at shutdown. It is called with no lock of the dispatcher held.
	// It must not block; a panic in it is recovered and logged. It may call
	// AddHigh and AddLow: an add the dispatcher refuses (after it stopped,
	// an invalid item, a panicking key func) is counted in the drops metric
	// and logged but never passed to OnDrop, so a hook that re-adds
	// everything it is given terminates.
	OnDrop func(Drop[H, L])
}

// ErrStopped is the reason (Drop.Err) given for items dropped because the
// dispatcher stopped: still queued or waiting for a retry when Run's context
// was done.
var ErrStopped = errors.New("sharding: dispatcher stopped")

// ErrGoexit is the error of a handler attempt that called runtime.Goexit (as
// t.FailNow does): the attempt failed as if the handler had returned
// ErrGoexit, and the shard goes on with a new worker goroutine.
var ErrGoexit = errors.New("sharding: handler called runtime.Goexit")

// ErrInvalidItem is the error logged when AddHigh or AddLow refuses an item
// that cannot be tracked: its value is not comparable (an interface holding
// a slice, map or func) or not equal to itself (a floating-point NaN, or a
// value holding one). Such an item could never be found again to dedupe,
// retry or release, so it is dropped and counted rather than panic or leak.
var ErrInvalidItem = errors.New("sharding: item is not comparable or not equal to itself")

// Drop describes an item a dispatcher gave up on; see Config.OnDrop.
type Drop[H, L comparable] struct {
	// Lane is the item's lane: the item is High for LaneHigh, Low for
	// LaneLow (the other field is zero).
	Lane Lane
	High H
	Low  L
	// Attempts is the number of handler attempts that failed for the item
	// since it was last (re)queued by an add; 0 if it never failed. An
	// attempt that failed once Run's context was done is not counted.
	Attempts int
	// Err says why: ErrStopped, or, when the retries ran out, an error
	// wrapping the last attempt's error (a *PanicError for a panic,
	// ErrGoexit for a runtime.Goexit).
	Err error
}

// PanicError is the error recorded for a handler or key func that panicked.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic, as runtime/debug.Stack
	// formats it.
	Stack []byte
}

// Error returns "sharding: panic: " followed by the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("sharding: panic: %v", e.Value) }

// validate returns an error naming the first invalid field of cfg.
func (cfg *Config[H, L]) validate() error {
	switch {
	case cfg.HandleHigh == nil:
		return errors.New("sharding: HandleHigh must not be nil")
	case cfg.HandleLow == nil:
		return errors.New("sharding: HandleLow must not be nil")
	case cfg.HighKey == nil:
		return errors.New("sharding: HighKey must not be nil")
	case cfg.LowKey == nil:
		return errors.New("sharding: LowKey must not be nil")
	case cfg.Shards < 0:
		return fmt.Errorf("sharding: Shards must not be negative, got %d", cfg.Shards)
	case cfg.Shards > MaxShards:
		return fmt.Errorf("sharding: Shards must be at most %d, got %d", MaxShards, cfg.Shards)
	case cfg.MaxHighBurst < 0:
		return fmt.Errorf("sharding: MaxHighBurst must not be negative, got %d", cfg.MaxHighBurst)
	}
	return cfg.Retry.validate()
}
