package faults_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// Fault 3. The leader is partitioned from the API server (its TCP proxy
// swallows everything, both ways, new connections too) for 20 s in the
// middle of countdowns. It stops acting within its renew deadline (Run
// returns ErrLeaderLost; the supervisor starts it again, still cut off);
// the standby takes the Lease once it has expired and ends every countdown
// at its original deadline ± 2 s, including countdowns whose start the
// objects do not record (a taint with no TimeAdded, pods created on their
// node): the standby saw them as the leader did. The oracle finds no write
// of the old leader after the standby acquired the Lease, nor after the
// partition healed. Lease 8 s, renew deadline 5 s, retry 1 s.
func TestLeaderPartitioned(t *testing.T) {
	t.Parallel()
	const (
		lease, renew, retry = 8 * time.Second, 5 * time.Second, time.Second
		partitionAt         = 3 * time.Second  // after the countdowns start
		partitionFor        = 20 * time.Second // deadlines are 16 … 33 s after they start
	)
	cl := newCluster(t, 3*time.Minute)
	proxies := map[string]*tcpProxy{}
	replicas := map[string]*replica{}
	for _, name := range []string{"a", "b"} {
		p := cl.newTCPProxy(name)
		r := cl.startReplica(name, cl.controllerConfig(p.Addr()), lease, renew, retry)
		proxies[name], replicas[r.Identity()] = p, r
	}
	first := cl.waitHolder(func(h string) bool { return replicas[h] != nil })
	leader := replicas[first.identity]
	var standby *replica
	for _, r := range replicas {
		if r != leader {
			standby = r
		}
	}
	t.Logf("%s leads, %s stands by", first.identity, standby.Identity())

	// Countdowns of known starts: a taint stamped now, pods bound now.
	start := time.Now()
	timed, added := cl.countdowns("timed", 6, 16*time.Second, 3*time.Second)
	// And of unknown starts: a taint with no TimeAdded, pods created on
	// their node (no PodScheduled): both replicas count from first sight.
	const untimedKey = "example.com/untimed"
	_, err := testenv.CreateNode(cl.ctx, cl.c, "untimed", corev1.Taint{Key: untimedKey, Value: "true", Effect: corev1.TaintEffectNoExecute})
	require.NoError(t, err)
	var untimed []*corev1.Pod
	for i := range 4 {
		p, err := testenv.CreatePodOnNode(cl.ctx, cl.c, testenv.NewPod(cl.ns, fmt.Sprintf("untimed-%d", i), corev1.Toleration{
			Key: untimedKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(int64(18 + 5*i)),
		}), "untimed")
		require.NoError(t, err)
		untimed = append(untimed, p)
	}

	cl.sleepUntil(start.Add(partitionAt))
	cut := time.Now()
	proxies[leader.name].blackhole()
	// It stops acting a renew deadline after its last renewal (at most a
	// retry period before the cut); its Run returns once its elector has
	// given up too, whose last request may wait its timeout (renew / 2).
	exitBound := retry + renew + renew/2 + time.Second
	exitCtx, cancel := context.WithTimeout(cl.ctx, exitBound+2*time.Second)
	exits, err := leader.waitExit(exitCtx, 1)
	cancel()
	if assert.NoError(t, err, "the partitioned leader did not exit") { // go on: the oracle says what it did
		t.Logf("MEASURED the partitioned leader %s exited %s after the partition began (renew deadline %s): %v",
			exits[0].identity, ms(exits[0].at.Sub(cut)), renew, exits[0].err)
		assert.LessOrEqual(t, exits[0].at.Sub(cut), exitBound, "the old leader exited late")
	}
	next := cl.waitHolder(func(h string) bool { return h == standby.Identity() })
	t.Logf("MEASURED takeover: %s holds the Lease %s after the partition began (lease %s)", next.identity, ms(next.at.Sub(cut)), lease)
	// Nobody could act from the partition to the takeover.
	fault := oracle.FaultWindow{Name: "leader partitioned, no leader yet", Start: cut, End: next.at}
	cl.oracle.Fault(fault.Name, fault.Start, fault.End)

	cl.sleepUntil(cut.Add(partitionFor))
	proxies[leader.name].heal()
	healed := time.Now()
	t.Logf("partition healed after %s", ms(healed.Sub(cut)))

	all := append(slices.Clone(timed), untimed...)
	cl.waitGone(all, time.Until(start.Add(60*time.Second)))
	rep, err := cl.oracle.Check()
	require.NoError(t, err)
	var timedLate, untimedLate lateStats
	for _, e := range rep.Evictions {
		if slices.ContainsFunc(untimed, func(p *corev1.Pod) bool { return p.UID == e.UID }) {
			untimedLate.late = append(untimedLate.late, e.Late())
		} else {
			timedLate.late = append(timedLate.late, e.Late())
		}
		assert.Equal(t, standby.Identity(), e.Identity, "%s removed by %s", e.Name, e.Identity)
		assert.InDelta(t, 0, e.Late().Seconds(), 2, "%s removed %s after its original deadline", e.Name, ms(e.Late()))
	}
	t.Logf("MEASURED deletions after the original deadline: known starts %s; starts from first sight %s (the oracle's own first sight; ±2 s allowed)",
		timedLate, untimedLate)
	assert.Len(t, rep.Evictions, len(all), "pods removed by the controller")
	for _, p := range timed {
		assert.True(t, deadlineOf(p, added).After(next.at), "%s's deadline came before the takeover: the test does not test it", p.Name)
	}
	if w, ok := rep.LastWrite[first.identity]; ok {
		assert.True(t, w.Before(next.at), "the old leader wrote to a pod at %s, after the takeover at %s", w, next.at)
	}
}
