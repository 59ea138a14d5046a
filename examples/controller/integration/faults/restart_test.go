package faults_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
)

// Fault 1. The API server is killed (SIGKILL) in the middle of 20
// countdowns and started again on its port with the same etcd. With lease
// 30 s and renew deadline 20 s the outage (measured: kill to ready) stays
// inside the renew deadline: the leader keeps the Lease, no replica
// restarts, and the oracle holds — every deadline that passed during the
// outage met by its end + 5 s, every later one within 2 s.
func TestAPIServerRestartMidCountdowns(t *testing.T) {
	t.Parallel()
	const (
		lease, renew, retry = 30 * time.Second, 20 * time.Second, 2 * time.Second
		pods                = 20
		killAt              = 9500 * time.Millisecond // after the taint; deadlines are 6 … 25 s after it, on whole seconds: the kill falls between two
		down                = 2 * time.Second         // from the kill to the start of the new server
	)
	cl := newCluster(t, 3*time.Minute)
	a := cl.startReplica("a", cl.controllerConfig(""), lease, renew, retry)
	b := cl.startReplica("b", cl.controllerConfig(""), lease, renew, retry)
	leader := cl.waitHolder(func(h string) bool { return h != "" })
	t.Logf("%s leads", leader.identity)

	created, added := cl.countdowns("restart", pods, 6*time.Second, time.Second)
	cl.sleepUntil(added.Add(killAt))
	killed := time.Now()
	require.NoError(t, cl.env.KillAPIServer())
	cl.sleepUntil(killed.Add(down))
	ready, serving := cl.restartAPIServer()
	outage := serving.Sub(killed)
	fault := oracle.FaultWindow{Name: "API server restart", Start: killed, End: serving}
	cl.oracle.Fault(fault.Name, fault.Start, fault.End)
	t.Logf("MEASURED outage: %s from the kill to the new server authorizing the controller (%s down, then its start; /readyz after %s)",
		ms(outage), down, ms(ready.Sub(killed)))
	assert.Less(t, outage, renew, "the outage must stay inside the renew deadline for this test")

	last := slices.MaxFunc(created, func(x, y *corev1.Pod) int { return deadlineOf(x, added).Compare(deadlineOf(y, added)) })
	cl.waitGone(created, time.Until(deadlineOf(last, added).Add(30*time.Second)))

	rep, err := cl.oracle.Check()
	require.NoError(t, err)
	during, after := lateness(rep, fault)
	t.Logf("MEASURED deletions of the %d pods due during the outage: %s after its end (bound 5 s); of the %d due after it: %s after their deadline (bound 2 s)",
		len(during.late), during, len(after.late), after)
	assert.Len(t, rep.Evictions, pods, "pods removed by the controller")
	assert.NotEmpty(t, during.late, "no deadline fell in the outage: the test did not test it")
	for _, tr := range rep.Transitions {
		assert.Equal(t, leader.identity, tr.Identity, "the Lease changed hands: %+v", rep.Transitions)
	}
	assert.Empty(t, a.Exits(), "replica a exited")
	assert.Empty(t, b.Exits(), "replica b exited")
}

// Fault 1, long: the API server stays away longer than the renew deadline.
// The leader stops acting once it could not renew for the renew deadline,
// and Run returns ErrLeaderLost, on which main exits 1 (as the README
// says); the test's supervisor starts it again, as a
// Deployment would. When the server is back a replica takes the Lease and
// the oracle holds across it all: later deadlines met within 2 s, no write
// from the old leader once it stopped. As no replica may act until one has taken the
// Lease, which a replica does a lease duration after its own first read
// of the Lease once the server is back (it trusts no other clock), the
// fault lasts until that takeover: pods due in it go by the takeover + 5 s.
func TestAPIServerLongOutage(t *testing.T) {
	t.Parallel()
	const (
		lease, renew, retry = 8 * time.Second, 5 * time.Second, time.Second
		pods                = 16
		killAt              = 6500 * time.Millisecond // after the taint; deadlines are 4 … 34 s after it, on whole seconds: the kill falls between two
		down                = 10 * time.Second        // from the kill to the start of the new server
	)
	cl := newCluster(t, 3*time.Minute)
	replicas := map[string]*replica{}
	for _, name := range []string{"a", "b"} {
		r := cl.startReplica(name, cl.controllerConfig(""), lease, renew, retry)
		replicas[r.Identity()] = r
	}
	first := cl.waitHolder(func(h string) bool { return replicas[h] != nil })
	leader := replicas[first.identity]
	t.Logf("%s leads", first.identity)

	created, added := cl.countdowns("outage", pods, 4*time.Second, 2*time.Second)
	cl.sleepUntil(added.Add(killAt))
	killed := time.Now()
	require.NoError(t, cl.env.KillAPIServer())
	cl.sleepUntil(killed.Add(down))
	ready, serving := cl.restartAPIServer()
	t.Logf("MEASURED outage: %s from the kill to the new server authorizing the controller (/readyz after %s; renew deadline %s)",
		ms(serving.Sub(killed)), ms(ready.Sub(killed)), renew)
	require.Greater(t, ready.Sub(killed), renew, "the outage must outlast the renew deadline for this test")

	exits, err := leader.waitExit(cl.ctx, 1)
	require.NoError(t, err)
	assert.ErrorIs(t, exits[0].err, app.ErrLeaderLost, "the leader's Run (the binary exits 1 on it)")
	t.Logf("MEASURED the leader %s stopped %s after the kill (renew deadline %s)", exits[0].identity, ms(exits[0].at.Sub(killed)), renew)
	// A replica trusts only its own sight of the Lease: one that missed the
	// last renewals before the outage counts the lease duration from its
	// first read after it. So nobody acts until then.
	next := cl.waitHolder(func(h string) bool { return h != "" && h != first.identity })
	t.Logf("MEASURED %s took the Lease %s after the server authorized the controller again (lease %s)", next.identity, ms(next.at.Sub(serving)), lease)
	assert.LessOrEqual(t, next.at.Sub(serving), lease+2*retry+time.Second, "takeover after the outage")
	fault := oracle.FaultWindow{Name: "API server down past the renew deadline, no leader yet", Start: killed, End: next.at}
	cl.oracle.Fault(fault.Name, fault.Start, fault.End)

	last := slices.MaxFunc(created, func(x, y *corev1.Pod) int { return deadlineOf(x, added).Compare(deadlineOf(y, added)) })
	cl.waitGone(created, time.Until(deadlineOf(last, added).Add(30*time.Second)))
	rep, err := cl.oracle.Check()
	require.NoError(t, err)
	during, after := lateness(rep, fault)
	t.Logf("MEASURED deletions of the %d pods due during the outage: %s after its end (bound 5 s); of the %d due after it: %s after their deadline (bound 2 s)",
		len(during.late), during, len(after.late), after)
	assert.Len(t, rep.Evictions, pods, "pods removed by the controller")
	assert.NotEmpty(t, during.late, "no deadline fell in the outage: the test did not test it")
	if w, ok := rep.LastWrite[first.identity]; ok {
		assert.True(t, w.Before(exits[0].at), "the old leader wrote to a pod at %s, after it stopped at %s", w, exits[0].at)
	}
}
