package sharding

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// DefaultShards is the number of shards when Config.Shards is zero, as in
// the taint manager; MaxShards is the largest number New accepts.
const (
	DefaultShards = 8
	MaxShards     = 1 << 16
)

// Config configures a [Dispatcher]. HighKey, LowKey, HandleHigh and
// HandleLow are required; the other fields' zero values are stated on them.
type Config[H, L comparable] struct {
	// Shards is the number of shards. Zero means DefaultShards; New rejects
	// negative values and values above MaxShards.
	Shards int

	// HighKey and LowKey return an item's shard key: items with equal keys
	// share a shard and are never handled at once. They run on the adding
	// goroutine and must give equal items the same key for the dispatcher's
	// lifetime, or an item can race with itself: if an item's key can
	// change, make the key part of the item.
	HighKey func(H) string
	LowKey  func(L) string

	// HandleHigh and HandleLow handle one item on its shard's worker. ctx
	// is done once Run's is. An attempt fails if it returns an error,
	// panics (a *PanicError, logged with its stack) or calls runtime.Goexit
	// ([ErrGoexit]).
	HandleHigh func(ctx context.Context, item H) error
	HandleLow  func(ctx context.Context, item L) error

	Clock clock.Clock // the source of time; nil means clock.RealClock{}
	Retry RetryPolicy // when a failed item is tried again, or dropped

	// MaxHighBurst bounds how long low items can starve. Zero means strict
	// priority, as in the original. With N > 0, a worker that has taken N
	// high items in a row while low items waited takes one low item next.
	// New rejects negative values.
	MaxHighBurst int

	// Logger receives failures (V(2)), panics and drops (errors). Nil means
	// klog.Background(); a given logger is used as is. To silence the
	// dispatcher: discard := logr.Discard(); cfg.Logger = &discard.
	Logger *logr.Logger

	Metrics MetricsProvider // creates the per-lane metrics; nil means none
	Name    string          // passed to Metrics, and logged unless ""

	// OnDrop, if not nil, is called once for every item the dispatcher
	// accepted and then gave up on: by the worker after the item's last
	// attempt, and by Run at shutdown. It must not block; a panic in it is
	// recovered and logged. It may add items: the adds the dispatcher
	// refuses never reach it (see [Dispatcher.AddHigh]), so a hook that
	// re-adds everything it is given terminates.
	OnDrop func(Drop[H, L])
}

// ErrStopped is the Drop.Err of items dropped by [Dispatcher.Run] at shutdown.
var ErrStopped = errors.New("sharding: dispatcher stopped")

// ErrGoexit is the error of an attempt whose handler called runtime.Goexit,
// as t.FailNow does. The attempt fails as if the handler had returned it.
var ErrGoexit = errors.New("sharding: handler called runtime.Goexit")

// ErrInvalidItem is logged for an item AddHigh or AddLow refuses because it
// is not comparable or not equal to itself (it holds a NaN).
var ErrInvalidItem = errors.New("sharding: item is not comparable or not equal to itself")

// Drop describes an item a dispatcher gave up on; see Config.OnDrop.
type Drop[H, L comparable] struct {
	Lane Lane // LaneHigh: the item is High; LaneLow: it is Low
	High H
	Low  L
	// Attempts counts failed attempts since the item was last queued by an
	// add, but not one that failed once Run's context was done.
	Attempts int
	// Err is ErrStopped, or, when the retries ran out, an error wrapping
	// the last attempt's error.
	Err error
}

// PanicError is the error of a handler or key func that panicked.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the stack at the panic, as runtime/debug.Stack gives it
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
	case cfg.Shards > MaxShards: // every shard costs a goroutine and its queues
		return fmt.Errorf("sharding: Shards must be at most %d, got %d", MaxShards, cfg.Shards)
	case cfg.MaxHighBurst < 0:
		return fmt.Errorf("sharding: MaxHighBurst must not be negative, got %d", cfg.MaxHighBurst)
	}
	return cfg.Retry.validate()
}
