package leasefence_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/leasefence"
)

// leaseStore is one Lease as the API server keeps it: a record and a
// resourceVersion, written only with the version last read (409 Conflict
// otherwise), as resourcelock.LeaseLock writes.
type leaseStore struct {
	mu     sync.Mutex
	rec    *resourcelock.LeaderElectionRecord
	rv     int
	writes []string // identity: holder written
}

func newLeaseStore() *leaseStore { return &leaseStore{} }

func (s *leaseStore) lock(identity string) *storeLock { return &storeLock{s: s, identity: identity} }

func (s *leaseStore) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.HolderIdentity
}

type storeLock struct {
	s        *leaseStore
	identity string
	rv       int // the version this lock last read or wrote
}

var leaseResource = coordinationv1.Resource("leases")

func (l *storeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec == nil {
		return nil, nil, apierrors.NewNotFound(leaseResource, "lease")
	}
	l.rv = l.s.rv
	rec := *l.s.rec
	return &rec, []byte(fmt.Sprint(rec)), nil
}

func (l *storeLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec != nil {
		return apierrors.NewAlreadyExists(leaseResource, "lease")
	}
	return l.write(ler)
}

func (l *storeLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.rv != l.s.rv {
		return apierrors.NewConflict(leaseResource, "lease", fmt.Errorf("version %d, not %d", l.s.rv, l.rv))
	}
	return l.write(ler)
}

func (l *storeLock) write(ler resourcelock.LeaderElectionRecord) error {
	l.s.rv++
	l.s.rec, l.rv = &ler, l.s.rv
	l.s.writes = append(l.s.writes, l.identity+": "+ler.HolderIdentity)
	return nil
}

func (l *storeLock) RecordEvent(string) {}
func (l *storeLock) Identity() string   { return l.identity }
func (l *storeLock) Describe() string   { return "kube-system/lease" }

func newFence(t *testing.T) *leasefence.Fence {
	t.Helper()
	f, err := leasefence.New(leasefence.Config{RenewDeadline: renewDeadline, Clock: testingclock.NewFakeClock(t0)})
	require.NoError(t, err)
	return f
}

// A replica that read the Lease and found another holder, as client-go's
// release does before it writes, writes nothing: the Lease keeps its
// holder. client-go itself would write an empty holder, since it checks
// whether it leads against the record it saw before its pause.
func TestReleaseLeavesAnotherHoldersLease(t *testing.T) {
	ctx := t.Context()
	store := newLeaseStore()
	f := newFence(t)
	a := f.Lock(store.lock("replica-a"))
	require.NoError(t, a.Create(ctx, record("replica-a")))
	b := store.lock("replica-b")
	_, _, err := b.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Update(ctx, record("replica-b")), "replica-b takes the Lease over")

	rec, _, err := a.Get(ctx) // the release reads the Lease, with its fresh version…
	require.NoError(t, err)
	require.Equal(t, "replica-b", rec.HolderIdentity)
	require.NoError(t, a.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1})) // …then releases

	assert.Equal(t, "replica-b", store.holder())
	assert.Equal(t, []string{"replica-a: replica-a", "replica-b: replica-b"}, store.writes, "writes of the Lease")
}

// The holder's own release is written, and ends its permission to write.
func TestReleaseOfOwnLease(t *testing.T) {
	ctx := t.Context()
	store := newLeaseStore()
	f := newFence(t)
	a := f.Lock(store.lock("replica-a"))
	require.NoError(t, a.Create(ctx, record("replica-a")))
	require.True(t, f.Allowed())
	_, _, err := a.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, a.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}))
	assert.Equal(t, "", store.holder())
	assert.False(t, f.Allowed(), "allowed to write after releasing the Lease")
}

// A release whose read named this replica but which raced another
// replica's write is refused by the server (the version it read is gone),
// and a renewal refused so does not renew.
func TestReleaseAfterChangeConflicts(t *testing.T) {
	ctx := t.Context()
	store := newLeaseStore()
	f := newFence(t)
	a := f.Lock(store.lock("replica-a"))
	require.NoError(t, a.Create(ctx, record("replica-a")))
	_, _, err := a.Get(ctx)
	require.NoError(t, err)
	b := store.lock("replica-b")
	_, _, err = b.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Update(ctx, record("replica-b")))

	err = a.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1})
	assert.True(t, apierrors.IsConflict(err), "release after another's write: %v", err)
	assert.Equal(t, "replica-b", store.holder())
}

// client-go's elector, cancelled after another replica took the Lease over
// while it was not looking (a paused process), releases on cancel with
// ReleaseOnCancel: through the fence's lock it leaves the new holder's
// Lease alone.
func TestElectorReleaseLeavesLeaseTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ns, name = "kube-system", "taintkit"
		client := fake.NewClientset()
		f, err := leasefence.New(leasefence.Config{RenewDeadline: renewDeadline})
		require.NoError(t, err)
		lock := f.Lock(&resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: name},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "replica-a"},
		})
		started := make(chan struct{})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   15 * time.Second,
			RenewDeadline:   renewDeadline,
			RetryPeriod:     2 * time.Second,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(started) },
				OnStoppedLeading: func() {},
			},
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			le.Run(ctx)
		}()
		<-started
		synctest.Wait() // between two renewals

		leases := client.CoordinationV1().Leases(ns)
		l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "replica-a", *l.Spec.HolderIdentity)
		l.Spec.HolderIdentity = ptr.To("replica-b")
		_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
		require.NoError(t, err)

		cancel()
		<-done
		l, err = leases.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "replica-b", ptr.Deref(l.Spec.HolderIdentity, ""), "the Lease's holder after replica-a's release")
	})
}
