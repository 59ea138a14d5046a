package app

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// renewals is the Lease lock the elector uses, recording when the last
// write of the lease that succeeded was sent. A leader must stop acting a
// renew deadline after that, whatever its elector still waits for: the
// elector checks its deadline only between tries, and one renewal sent
// into a partition waits for its request timeout, so it may notice the
// loss after the renew deadline, and after a standby, which counts the
// lease duration from when it saw the last renewal, has taken over.
type renewals struct {
	resourcelock.Interface
	last atomic.Int64 // Unix nanoseconds when the last successful write was sent
}

func (r *renewals) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := r.Interface.Create(ctx, ler)
	if err == nil {
		r.last.Store(sent.UnixNano())
	}
	return err
}

func (r *renewals) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := r.Interface.Update(ctx, ler)
	if err == nil {
		r.last.Store(sent.UnixNano())
	}
	return err
}

// expired returns a channel closed once deadline has passed since the last
// successful write with no newer one, or ctx is done.
func (r *renewals) expired(ctx context.Context, deadline time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			wait := time.Until(time.Unix(0, r.last.Load()).Add(deadline))
			if wait <= 0 {
				return
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
	}()
	return ch
}
