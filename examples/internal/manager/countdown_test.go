package manager_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

// Tests of when a countdown starts and what moves its deadline, with every
// combination of a known and an unknown start: a pod with or without a
// PodScheduled condition, a taint with or without TimeAdded.

// known says which start times the cluster records.
type known struct{ pod, taint bool }

var everyKnown = []known{{true, true}, {true, false}, {false, true}, {false, false}}

func (k known) String() string {
	word := func(b bool) string {
		if b {
			return "known"
		}
		return "unknown"
	}
	return fmt.Sprintf("pod %s, taint %s", word(k.pod), word(k.taint))
}

// addPodK adds a pod bound to node. With k.pod false it has no PodScheduled
// condition (created with its node name set), so when it arrived is unknown.
func (e *env) addPodK(k known, name, node string, tols []v1.Toleration) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.PodSpec{NodeName: node, Tolerations: tols},
	}
	add := e.c.AddPod
	if !k.pod {
		add = e.c.AddPodAsIs
	}
	p, err := add(pod)
	require.NoError(e.t, err)
	e.settle()
	return p
}

// taintK sets the node's taints. With k.taint true, NoExecute taints get a
// TimeAdded (kept for a taint already there, as the node lifecycle
// controller does); with false they have none, as kubelet's
// --register-with-taints sets them.
func (e *env) taintK(k known, node string, taints ...v1.Taint) {
	if k.taint {
		require.NoError(e.t, e.c.SetTaints(node, taints...))
	} else {
		n, err := e.c.GetNode(node)
		require.NoError(e.t, err)
		n = n.DeepCopy()
		n.Spec.Taints = nil
		for _, t := range taints {
			t.TimeAdded = nil
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
		require.NoError(e.t, e.c.UpdateNode(n))
	}
	e.settle()
}

func (e *env) setTolerations(name string, tols []v1.Toleration) {
	p := e.pod(name).DeepCopy()
	p.Spec.Tolerations = tols
	_, err := e.c.UpdatePod(p)
	require.NoError(e.t, err)
	e.settle()
}

var (
	taintB = v1.Taint{Key: "example.com/b", Effect: v1.TaintEffectNoExecute}
	taintC = v1.Taint{Key: "example.com/c", Effect: v1.TaintEffectNoExecute}
)

// tol tolerates the taint with key for secs seconds; secs < 0 means forever.
func tol(key string, secs int64) v1.Toleration {
	t := v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	if secs >= 0 {
		t.TolerationSeconds = ptr.To(secs)
	}
	return t
}

// evictedAt checks that the pod named name is still there just before t0+at
// and gone at t0+at, and then that it was deleted once.
func (e *env) evictedAt(name string, at time.Duration) {
	e.t.Helper()
	now := e.clk.Since(t0)
	if at > now {
		e.step(at - now - time.Nanosecond)
		require.True(e.t, e.exists(name), "evicted before +%v", at)
		e.step(time.Nanosecond)
	}
	require.False(e.t, e.exists(name), "not evicted at +%v (scheduled evictions: %d, stats %+v)",
		at, e.manager().ScheduledEvictions(), e.manager().Stats())
	e.step(time.Hour)
	st := e.manager().Stats()
	assert.Equal(e.t, int64(1), st.Evicted, "evictions")
	assert.Equal(e.t, int64(0), st.Gone, "evictions that found the pod gone (a second eviction)")
}

// Issue 9, defect 1: whatever is unknown, the countdown runs from when the
// manager first saw it and ends at first sight + toleration, however often
// the pod is decided again meanwhile.
func TestCountdownRunsFromFirstSight(t *testing.T) {
	for _, k := range everyKnown {
		for _, podFirst := range []bool{true, false} {
			name := k.String() + ", taint first"
			if podFirst {
				name = k.String() + ", pod first"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newEnv(t)
					e.addNode("n1")
					tols := append(tolerating(100), tol(taintB.Key, -1))
					// The second of the two, at +10s, starts the countdown.
					if podFirst {
						e.addPodK(k, "p", "n1", tols)
						e.step(10 * time.Second)
						e.taintK(k, "n1", noExec)
					} else {
						e.taintK(k, "n1", noExec)
						e.step(10 * time.Second)
						e.addPodK(k, "p", "n1", tols)
					}
					w, ok := e.manager().ScheduledEviction("default", "p")
					require.True(t, ok, "no eviction scheduled")
					assert.Equal(t, t0.Add(110*time.Second), w.FireAt)

					// Decided again: by a node update (a taint tolerated
					// forever)...
					e.step(40 * time.Second)
					e.taintK(k, "n1", noExec, taintB)
					// ... and by a pod update.
					e.step(20 * time.Second)
					e.setTolerations("p", append(tols, tol(taintC.Key, -1)))
					w, ok = e.manager().ScheduledEviction("default", "p")
					require.True(t, ok, "no eviction scheduled")
					assert.Equal(t, t0.Add(110*time.Second), w.FireAt, "deciding again moved the deadline")

					e.evictedAt("p", 110*time.Second)
				})
			})
		}
	}
}

// One rule for changes while a countdown runs: a deadline moves later only
// when its taint goes away or the pod is another pod (new UID); everything
// else can only bring it earlier, and "tolerated forever" cancels it.
func TestDeadlineRule(t *testing.T) {
	const never = -1
	type tc struct {
		name   string
		taints []v1.Taint      // at t0
		tols   []v1.Toleration // of the pod, added at t0
		change func(e *env, k known)
		missed bool          // the manager misses the change's events (an informer's lag)
		want   time.Duration // when the pod is evicted; never: not at all
	}
	cases := []tc{
		{
			name:   "longer toleration does not postpone",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, _ known) { e.setTolerations("p", tolerating(300)) },
			want:   100 * time.Second,
		},
		{
			// The eviction decides again when it fires and must keep its
			// deadline too.
			name:   "longer toleration, change seen only by the eviction",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, _ known) { e.setTolerations("p", tolerating(300)) },
			missed: true,
			want:   100 * time.Second,
		},
		{
			name:   "shorter toleration brings it earlier",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, _ known) { e.setTolerations("p", tolerating(60)) },
			want:   60 * time.Second,
		},
		{
			name:   "shorter toleration already run out evicts at once",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, _ known) { e.setTolerations("p", tolerating(30)) },
			want:   50 * time.Second,
		},
		{
			name:   "stricter new taint brings it earlier",
			taints: []v1.Taint{noExec}, tols: []v1.Toleration{tol(noExec.Key, 100), tol(taintB.Key, 20)},
			change: func(e *env, k known) { e.taintK(k, "n1", noExec, taintB) },
			want:   70 * time.Second,
		},
		{
			name:   "untolerated new taint evicts at once",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, k known) { e.taintK(k, "n1", noExec, taintB) },
			want:   50 * time.Second,
		},
		{
			name:   "its taint goes, a longer countdown takes over",
			taints: []v1.Taint{noExec, taintB}, tols: []v1.Toleration{tol(noExec.Key, 100), tol(taintB.Key, 300)},
			change: func(e *env, k known) { e.taintK(k, "n1", taintB) },
			want:   300 * time.Second,
		},
		{
			// Seed 003: the re-added taint is a new taint with a new
			// countdown, which must end.
			name:   "its taint goes and comes back",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, k known) {
				e.taintK(k, "n1")
				e.step(10 * time.Second)
				e.taintK(k, "n1", noExec)
			},
			want: 160 * time.Second,
		},
		{
			name:   "tolerated forever cancels",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, _ known) { e.setTolerations("p", tolerating(-1)) },
			want:   never,
		},
		{
			name:   "a new pod under the same name gets a fresh countdown",
			taints: []v1.Taint{noExec}, tols: tolerating(100),
			change: func(e *env, k known) {
				require.NoError(e.t, e.c.DeletePod(context.Background(), "default", "p", metav1.DeleteOptions{}))
				e.settle()
				e.addPodK(k, "p", "n1", tolerating(100))
			},
			want: 150 * time.Second,
		},
	}
	for _, c := range cases {
		for _, k := range everyKnown {
			t.Run(c.name+"/"+k.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newEnv(t)
					e.addNode("n1")
					e.taintK(k, "n1", c.taints...)
					e.addPodK(k, "p", "n1", c.tols)
					e.step(50 * time.Second)
					e.pause(c.missed)
					c.change(e, k)
					e.pause(false)
					if c.want == never {
						e.step(24 * time.Hour)
						assert.True(t, e.exists("p"), "evicted")
						assert.Equal(t, 0, e.manager().ScheduledEvictions())
						return
					}
					e.evictedAt("p", c.want)
				})
			})
		}
	}
}

// A pod deleted and recreated under the same name while the manager heard
// nothing of it (an informer's relist): the eviction finds another pod when
// it fires, and the new pod's countdown runs from when the manager first saw
// it, then ends.
func TestRecreatedPodUnseenGetsItsOwnCountdown(t *testing.T) {
	for _, k := range everyKnown {
		t.Run(k.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.addNode("n1")
				e.taintK(k, "n1", noExec)
				old := e.addPodK(k, "p", "n1", tolerating(100))
				e.step(50 * time.Second)
				e.pause(true)
				require.NoError(t, e.c.DeletePod(context.Background(), "default", "p", metav1.DeleteOptions{}))
				fresh := e.addPodK(k, "p", "n1", tolerating(100))
				e.pause(false)
				require.NotEqual(t, old.UID, fresh.UID)
				e.step(50 * time.Second)
				require.True(t, e.exists("p"), "the new pod was evicted by the old pod's eviction")
				// Bound at +50s; with no PodScheduled time, first seen when
				// the old pod's eviction fired at +100s.
				want := 150 * time.Second
				if !k.pod {
					want = 200 * time.Second
				}
				e.evictedAt("p", want)
			})
		})
	}
}

// Several taints tolerated for different times, added at different times:
// the first countdown to run out evicts.
func TestFirstCountdownToRunOutWins(t *testing.T) {
	for _, k := range everyKnown {
		t.Run(k.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.addNode("n1")
				e.taintK(k, "n1", noExec)
				e.addPodK(k, "p", "n1", []v1.Toleration{
					tol(taintC.Key, -1), tol(noExec.Key, 300), tol(taintB.Key, 100),
				})
				e.step(20 * time.Second)
				e.taintK(k, "n1", noExec, taintC) // forever: no deadline
				e.step(80 * time.Second)
				e.taintK(k, "n1", taintB, noExec, taintC) // +100s: B runs out at +200s, before noExec's +300s
				w, ok := e.manager().ScheduledEviction("default", "p")
				require.True(t, ok)
				assert.Equal(t, t0.Add(200*time.Second), w.FireAt)
				e.evictedAt("p", 200*time.Second)
			})
		})
	}
}

// After a controller restart the new manager computes the same deadlines
// from recorded times; only a countdown whose start was unknown restarts,
// from the restart, as upstream's does.
func TestRestartRestartsOnlyUnknownCountdowns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.addNode("known")
		e.addNode("unknown")
		e.taintK(known{taint: true}, "known", noExec)
		e.taintK(known{taint: false}, "unknown", noExec)
		for _, k := range everyKnown {
			node := "known"
			if !k.taint {
				node = "unknown"
			}
			name := fmt.Sprintf("pod-%v-%v", k.pod, k.taint)
			e.addPodK(k, name, node, tolerating(300))
		}
		e.step(200 * time.Second)
		e.stopManager()
		e.step(50 * time.Second)
		e.start() // at +250s

		for _, k := range everyKnown {
			name := fmt.Sprintf("pod-%v-%v", k.pod, k.taint)
			want := t0.Add(300 * time.Second)
			if !k.pod || !k.taint {
				want = t0.Add(550 * time.Second)
			}
			w, ok := e.manager().ScheduledEviction("default", name)
			if assert.True(t, ok, "%s: no eviction scheduled", k) {
				assert.Equal(t, want, w.FireAt, "%s", k)
			}
		}
		e.step(50*time.Second - time.Nanosecond)
		assert.Equal(t, 4, e.c.NumPods())
		e.step(time.Nanosecond)
		assert.Equal(t, 3, e.c.NumPods(), "the known countdown did not end at +300s")
		e.step(250*time.Second - time.Nanosecond)
		assert.Equal(t, 3, e.c.NumPods())
		e.step(time.Nanosecond)
		assert.Equal(t, 0, e.c.NumPods(), "the restarted countdowns did not end at restart + 300s")
		e.step(time.Hour)
		assert.Equal(t, 0, e.c.NumPods())
		assert.Equal(t, 4, e.c.Stats().DeleteCalls)
	})
}

// What the manager remembers about countdowns goes with the pod, the taint
// or the node it is about.
func TestCountdownStateForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		unknown := known{}
		tols := append(tolerating(100), tol(taintB.Key, -1))
		for _, n := range []string{"n1", "n2", "n3"} {
			e.addNode(n)
			e.taintK(unknown, n, noExec, taintB)
		}
		e.addPodK(unknown, "evicted", "n1", tols)
		e.addPodK(unknown, "deleted", "n1", tols)
		e.addPodK(unknown, "forever", "n1", []v1.Toleration{tol("", -1)})
		e.addPodK(unknown, "untainted", "n2", tols)
		e.addPodK(unknown, "orphan", "n3", tols)
		remembered := func(wantPods, wantNodes int, when string) {
			t.Helper()
			pods, nodes := e.manager().Remembered()
			assert.Equal(t, wantPods, pods, "pods remembered %s", when)
			assert.Equal(t, wantNodes, nodes, "nodes remembered %s", when)
		}
		// Every pod here has no PodScheduled time: each has a first sight,
		// kept while it is on its node.
		remembered(5, 3, "at first")

		e.step(10 * time.Second)
		require.NoError(t, e.c.DeletePod(context.Background(), "default", "deleted", metav1.DeleteOptions{}))
		e.settle()
		remembered(4, 3, "after a pod was deleted")

		e.step(10 * time.Second)
		e.taintK(unknown, "n2", taintB) // the taint counting down goes
		remembered(4, 3, "after a taint went")
		e.taintK(unknown, "n2") // the last one goes
		remembered(4, 2, "after a node's last taint went")

		e.step(10 * time.Second)
		require.NoError(t, e.c.DeleteNode("n3"))
		e.settle()
		remembered(3, 1, "after a node was deleted")

		e.step(70 * time.Second)
		require.False(t, e.exists("evicted"))
		remembered(2, 1, "after the last countdown ended")
		e.taintK(unknown, "n1")
		remembered(2, 0, "after every taint went")
		for _, name := range []string{"forever", "untainted"} {
			require.NoError(t, e.c.DeletePod(context.Background(), "default", name, metav1.DeleteOptions{}))
		}
		e.settle()
		remembered(0, 0, "after every pod went")
	})
}

// A million short-lived pods, each with a countdown from first sight on a
// taint with no TimeAdded, leave nothing behind: the state stays the size of
// the pods alive at once, and the heap does not grow. -short runs 20,000,
// -race 100,000.
func TestShortLivedPodsLeaveNoState(t *testing.T) {
	total, batch := 1_000_000, 2_000
	switch {
	case testing.Short():
		total = 20_000
	case raceEnabled:
		total = 100_000
	}
	synctest.Test(t, func(t *testing.T) {
		// No recorder: it keeps every event.
		e := newEnv(t, func(c *manager.Config) { c.Logger, c.Recorder = ptr.To(logr.Discard()), nil })
		e.addNode("n1")
		e.taintK(known{}, "n1", noExec)
		ctx := context.Background()
		var base uint64
		for b := range total / batch {
			names := make([]string, batch)
			for i := range names {
				names[i] = fmt.Sprintf("p-%d", b*batch+i)
				secs := int64(3600)
				if i%2 == 0 {
					secs = 0 // evicted at once
				}
				_, err := e.c.AddPodAsIs(&v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: "default"},
					Spec:       v1.PodSpec{NodeName: "n1", Tolerations: tolerating(secs)},
				})
				require.NoError(t, err)
			}
			e.settle()
			pods, _ := e.manager().Remembered()
			require.Equal(t, batch/2, pods, "batch %d: pods remembered while alive", b)
			for i := 1; i < batch; i += 2 {
				require.NoError(t, e.c.DeletePod(ctx, "default", names[i], metav1.DeleteOptions{}))
			}
			e.settle()
			e.step(time.Second)
			pods, nodes := e.manager().Remembered()
			require.Equal(t, 0, pods, "batch %d: pods remembered after they went", b)
			require.Equal(t, 1, nodes, "batch %d: nodes remembered", b)
			if b == 0 {
				base = heapAfterGC()
			}
		}
		assert.Equal(t, int64(total/2), e.manager().Stats().Evicted)
		grown := int64(heapAfterGC()) - int64(base)
		t.Logf("heap after %d pods: %+d KiB from after the first %d", total, grown>>10, batch)
		assert.Less(t, grown, int64(8<<20), "heap grew by %d KiB", grown>>10)
	})
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
