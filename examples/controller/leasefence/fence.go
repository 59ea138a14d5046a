package leasefence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ErrExpired is wrapped by the error of every request a [Fence] refuses.
var ErrExpired = errors.New("leasefence: no renewal of the Lease succeeded within the renew deadline")

// Config configures a [Fence].
type Config struct {
	// RenewDeadline is how long after the last renewal of the Lease that
	// succeeded this replica may still write: the leader election's renew
	// deadline. It must be positive.
	RenewDeadline time.Duration
	// Clock is read at every check. Nil means clock.RealClock{}.
	Clock clock.Clock
	// Logger logs refused requests (at V(2)) and releases not made. The
	// zero Logger means klog.Background().
	Logger logr.Logger
}

// Fence says whether this replica may write: whether the last write of
// the Lease that named it and succeeded was sent less than the renew
// deadline ago, on both clocks (see the package doc). Before any such
// write, and after a write that gave the Lease up, it may not.
//
// A Fence is safe for concurrent use by multiple goroutines. The zero
// value is not usable; call [New].
type Fence struct {
	deadline time.Duration
	clock    clock.Clock
	log      logr.Logger
	// wake is signalled when a request is refused, so that Lost looks
	// again at once rather than at its timer.
	wake chan struct{}

	mu       sync.Mutex
	identity string    // the wrapped lock's identity
	renewed  time.Time // when the last successful write naming identity was sent; zero if none
	holder   string    // the holder in the record the lock last read or wrote
}

// New returns a Fence for a leader election with the given renew deadline.
// It refuses every write until a lock it wraps ([Fence.Lock]) has written
// a record naming this replica.
func New(cfg Config) (*Fence, error) {
	if cfg.RenewDeadline <= 0 {
		return nil, fmt.Errorf("leasefence: RenewDeadline must be positive, got %v", cfg.RenewDeadline)
	}
	f := &Fence{deadline: cfg.RenewDeadline, clock: cfg.Clock, log: cfg.Logger, wake: make(chan struct{}, 1)}
	if f.clock == nil {
		f.clock = clock.RealClock{}
	}
	if f.log.GetSink() == nil {
		f.log = klog.Background()
	}
	f.log = f.log.WithName("leasefence")
	return f, nil
}

// Allowed reports whether this replica may write now: the last renewal of
// the Lease that succeeded was sent less than the renew deadline ago, by
// the monotonic clock and by the wall clock.
func (f *Fence) Allowed() bool {
	f.mu.Lock()
	renewed := f.renewed
	f.mu.Unlock()
	_, ok := f.remaining(renewed)
	return ok
}

// remaining returns how long writes stay allowed after a renewal sent at
// renewed, on the monotonic clock, and whether they are allowed now.
func (f *Fence) remaining(renewed time.Time) (time.Duration, bool) {
	if renewed.IsZero() {
		return 0, false
	}
	now := f.clock.Now()
	left := f.deadline - now.Sub(renewed) // monotonic, when both times carry it
	wall := f.deadline - now.Round(0).Sub(renewed.Round(0))
	return left, left > 0 && wall > 0
}

// Lost returns a channel that is closed once this replica may no longer
// write, or ctx is done (tell the two apart with ctx.Err). It looks again
// when the renew deadline since the last renewal passes on the clock, and
// at once when a request was refused: so a replica whose timer has not yet
// fired (a process paused, a suspended machine) stops at its first
// refused write. Call it once the replica leads: before that, it is
// closed at once.
func (f *Fence) Lost(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			f.mu.Lock()
			renewed := f.renewed
			f.mu.Unlock()
			left, ok := f.remaining(renewed)
			if !ok {
				return
			}
			timer := f.clock.NewTimer(left)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-f.wake:
				timer.Stop()
			case <-timer.C():
			}
		}
	}()
	return ch
}

// refused records that a request was refused.
func (f *Fence) refused() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}
