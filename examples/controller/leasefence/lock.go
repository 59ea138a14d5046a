package leasefence

import (
	"context"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lock returns lock wrapped for the leader elector: its successful writes
// of a record naming lock's identity renew the fence; a write of a record
// naming anyone else (client-go's release, which names no one) is made only
// if the record the lock last read or wrote names this replica, and
// otherwise not at all: Update returns nil and writes nothing. Since the lock
// writes with the resourceVersion of that record, the API server refuses
// the release if the Lease changed after it was read. A successful release
// ends the fence's permission to write. Give the Fence one lock.
func (f *Fence) Lock(lock resourcelock.Interface) resourcelock.Interface {
	f.mu.Lock()
	f.identity = lock.Identity()
	f.mu.Unlock()
	return &fencedLock{Interface: lock, f: f}
}

// fencedLock is the lock Fence.Lock returns.
type fencedLock struct {
	resourcelock.Interface
	f *Fence
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil {
		l.f.mu.Lock()
		l.f.holder = rec.HolderIdentity
		l.f.mu.Unlock()
	}
	return rec, raw, err
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.f.clock.Now()
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.f.wrote(ler.HolderIdentity, sent)
	}
	return err
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.f.mu.Lock()
	me, holder := l.f.identity, l.f.holder
	l.f.mu.Unlock()
	if ler.HolderIdentity != me && holder != me {
		// A release by a replica that no longer holds the Lease: client-go
		// checks whether it leads against the record it saw before, not
		// the one it has just read, and the write would carry the fresh
		// resourceVersion, so nothing would stop it.
		l.f.log.Info("Not releasing the Lease: another replica holds it", "lock", l.Describe(), "holder", holder, "identity", me)
		return nil
	}
	sent := l.f.clock.Now()
	err := l.Interface.Update(ctx, ler)
	if err == nil {
		l.f.wrote(ler.HolderIdentity, sent)
	}
	return err
}

// wrote records a successful write of the Lease naming holder, sent at
// sent: a renewal if it names this replica, else the end of its lead.
func (f *Fence) wrote(holder string, sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holder = holder
	if holder == f.identity {
		f.renewed = sent
	} else {
		f.renewed = time.Time{}
	}
}
