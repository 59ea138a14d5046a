package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/timedqueue"
)

var unreachable = v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}

// tolerate returns a toleration of the unreachable taint for secs seconds,
// or forever if secs < 0.
func tolerate(secs int64) []v1.Toleration {
	t := v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	if secs >= 0 {
		t.TolerationSeconds = ptr.To(secs)
	}
	return []v1.Toleration{t}
}

// runScenario plays the scripted scenario: the manager as upstream's, then
// with safe eviction turned on. A nil newClock means fake clocks, moved by
// the script from one due eviction to the next; otherwise the script waits
// for each act's clock to reach each step.
func runScenario(out io.Writer, newClock func() clock.Clock, log logr.Logger) error {
	if err := runAct(out, newClock, log, nil, (*scenario).play); err != nil {
		return err
	}
	return runAct(out, newClock, log, func(c *manager.Config) {
		c.UseEvictionAPI = true
		c.EvictionFallbackAfter = 3 * time.Minute
		c.EvictionRate, c.EvictionBurst = 1, 2
	}, (*scenario).playSafe)
}

// runAct plays one act on a cluster and a manager of its own.
func runAct(out io.Writer, newClock func() clock.Clock, log logr.Logger, tweak func(*manager.Config), play func(*scenario) error) error {
	s := &scenario{out: out, shown: make(map[types.NamespacedName]time.Time)}
	if newClock == nil {
		s.fake = testingclock.NewFakeClock(t0)
		s.clk = s.fake
	} else {
		s.clk = newClock()
	}
	s.c = cluster.New(s.clk)
	cfg := manager.Config{
		GetNode:    s.c.GetNode,
		GetPod:     s.c.GetPod,
		PodsOnNode: s.c.PodsOnNode,
		Client:     &loggingClient{Cluster: s.c, s: s},
		Recorder:   s,
		Clock:      s.clk,
		Logger:     &log,
		// Retry a failed delete after 1 s, 2 s, 4 s, … (at most 30 s).
		EvictionRetry: timedqueue.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 30 * time.Second},
		TrackIdle:     true,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	m, err := manager.New(cfg)
	if err != nil {
		return err
	}
	s.m = m
	// The informer wiring: every change in the cluster reaches the manager.
	s.c.OnNode(m.NodeUpdated)
	s.c.OnPod(m.PodUpdated)
	s.c.OnPod(s.podChanged)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	return play(s)
}

func (s *scenario) play() error {
	clockName := "a fake clock"
	if s.fake == nil {
		clockName = "a real clock, sped up"
	}
	s.printf("NoExecute taint manager (examples/noexecute) on %s; times are offsets from t0.\n", clockName)
	s.printf("Nodes node-a, node-b, node-c; the taint is %s.\n\n", unreachable.ToString())

	for _, n := range []string{"node-a", "node-b", "node-c"} {
		if err := s.c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			return err
		}
	}
	pods := []struct {
		name, node string
		tols       []v1.Toleration
		note       string
	}{
		{"web-1", "node-a", nil, "tolerates nothing"},
		{"cache-1", "node-a", tolerate(300), "tolerates the taint for 300s"},
		{"agent-1", "node-a", tolerate(-1), "tolerates it forever"},
		{"flaky-1", "node-a", nil, "tolerates nothing; its first 2 deletes fail"},
		{"cache-2", "node-b", tolerate(300), "tolerates the taint for 300s"},
		{"cache-3", "node-c", tolerate(30), "tolerates the taint for 30s"},
	}
	for _, p := range pods {
		if _, err := s.c.AddPod(&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default"},
			Spec:       v1.PodSpec{NodeName: p.node, Tolerations: p.tols},
		}); err != nil {
			return err
		}
		s.printf("  pod %-8s on %s  %s\n", p.name, p.node, p.note)
	}
	s.c.FailDeletes("default", "flaky-1", 2)
	s.printf("\n")
	if err := s.settle(); err != nil {
		return err
	}

	steps := []step{
		{0, "taint node-a and node-b", func() error {
			return cmp.Or(s.c.SetTaints("node-a", unreachable), s.c.SetTaints("node-b", unreachable))
		}},
		{60 * time.Second, "untaint node-b (before cache-2's 300s run out)", func() error {
			return s.c.SetTaints("node-b")
		}},
		{100 * time.Second, "taint node-c", func() error { return s.c.SetTaints("node-c", unreachable) }},
		{100*time.Second + 400*time.Millisecond, "untaint node-c", func() error { return s.c.SetTaints("node-c") }},
		{100*time.Second + 800*time.Millisecond, "taint node-c again (the seed-003 flap)", func() error {
			return s.c.SetTaints("node-c", unreachable)
		}},
		{120 * time.Second, "create web-2 (tolerates nothing) and cache-4 (300s) on tainted node-a", func() error {
			_, err1 := s.c.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: "default"},
				Spec: v1.PodSpec{NodeName: "node-a"}})
			_, err2 := s.c.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cache-4", Namespace: "default"},
				Spec: v1.PodSpec{NodeName: "node-a", Tolerations: tolerate(300)}})
			return cmp.Or(err1, err2)
		}},
		{10 * time.Minute, "end", nil},
	}
	if err := s.run(steps); err != nil {
		return err
	}
	left := s.podsLeft()
	st := s.m.Stats()
	s.printf("\nPods left: %v. Evicted %d, cancelled %d, delete calls %d (%d failed and were retried).\n",
		left, st.Evicted, st.Cancelled, s.c.Stats().DeleteCalls, s.c.Stats().Injected)
	return nil
}

// scenario prints a timeline of what the cluster and the manager do.
type scenario struct {
	out   io.Writer
	clk   clock.Clock
	fake  *testingclock.FakeClock // nil with -real
	c     *cluster.Cluster
	m     *manager.Manager
	shown map[types.NamespacedName]time.Time // evictions printed as scheduled
	waits map[types.NamespacedName]time.Time // budget waits printed

	mu    sync.Mutex
	batch []entry // what happened since the last settle
}

// entry is a timeline line reported by the manager's goroutines. Lines of
// one settle are sorted by time, then pod, so concurrent shards and
// evictions print in the same order on every run; a pod's own lines keep
// their order.
type entry struct {
	at   time.Duration
	pod  string
	text string
}

func (s *scenario) printf(format string, args ...any) { fmt.Fprintf(s.out, format, args...) }

func (s *scenario) offset(at time.Duration) string {
	if s.fake == nil {
		at = at.Round(100 * time.Millisecond)
	}
	return "+" + strconv.FormatFloat(at.Seconds(), 'f', -1, 64) + "s"
}

func (s *scenario) now() time.Duration { return s.clk.Since(t0) }

func (s *scenario) action(what string) {
	s.printf("%-8s %s\n", s.offset(s.now()), what)
}

func (s *scenario) report(pod types.NamespacedName, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batch = append(s.batch, entry{at: s.now(), pod: pod.String(), text: fmt.Sprintf(format, args...)})
}

// Eventf makes the scenario the manager's EventRecorder.
func (s *scenario) Eventf(obj runtime.Object, _, reason, format string, args ...any) {
	ref := obj.(*v1.ObjectReference)
	s.report(types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, "  event   %s %s: %s", ref.Name, reason, fmt.Sprintf(format, args...))
}

func (s *scenario) podChanged(old, new *v1.Pod) {
	if new != nil || old == nil {
		return
	}
	why := ""
	for _, c := range old.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			why = fmt.Sprintf(" (condition %s: %s)", c.Type, c.Reason)
		}
	}
	s.report(types.NamespacedName{Namespace: old.Namespace, Name: old.Name}, "  deleted %s/%s%s", old.Namespace, old.Name, why)
}

// loggingClient reports failed deletes on the timeline.
type loggingClient struct {
	*cluster.Cluster
	s *scenario
}

func (l *loggingClient) EvictPod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	err := l.Cluster.EvictPod(ctx, ns, name, opts)
	switch {
	case manager.IsRefusedByBudget(err):
		l.s.report(types.NamespacedName{Namespace: ns, Name: name}, "  evict   %s/%s refused: %v", ns, name, err)
	case err != nil:
		l.s.report(types.NamespacedName{Namespace: ns, Name: name}, "  evict   %s/%s failed: %v", ns, name, err)
	}
	return err
}

func (l *loggingClient) DeletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	err := l.Cluster.DeletePod(ctx, ns, name, opts)
	if err != nil {
		l.s.report(types.NamespacedName{Namespace: ns, Name: name}, "  delete  %s/%s failed: %v", ns, name, err)
	}
	return err
}

// settle waits until the manager has done everything due, then prints it,
// and the evictions scheduled or moved since the last settle.
func (s *scenario) settle() error {
	if err := waitIdle(s.m); err != nil {
		return err
	}
	s.mu.Lock()
	batch := s.batch
	s.batch = nil
	s.mu.Unlock()
	slices.SortStableFunc(batch, func(a, b entry) int {
		if s.fake == nil {
			return 0 // real timers: print in the order things happened
		}
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.pod, b.pod))
	})
	for _, e := range batch {
		s.printf("%-8s %s\n", s.offset(e.at), e.text)
	}
	budgetWaits := make(map[types.NamespacedName]bool)
	for _, p := range s.m.Pending() {
		if p.LastError == "" { // waiting, but nothing failed: a budget's token
			budgetWaits[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	for _, p := range s.c.ListPods() {
		k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		w, ok := s.m.ScheduledEviction(k.Namespace, k.Name)
		if !ok {
			delete(s.shown, k)
			continue
		}
		if prev, seen := s.shown[k]; seen && prev.Equal(w.FireAt) {
			continue
		}
		s.shown[k] = w.FireAt
		if w.Attempts > 0 {
			continue // a retry: its failure is on the timeline
		}
		s.printf("%-8s   eviction of %s scheduled for %s\n", s.offset(s.now()), k, s.offset(w.FireAt.Sub(t0)))
	}
	for _, p := range s.c.ListPods() {
		k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		w, ok := s.m.ScheduledEviction(k.Namespace, k.Name)
		if next := w.NextAttempt; ok && budgetWaits[k] && next.After(w.FireAt) && next.After(s.clk.Now()) && !next.Equal(s.waits[k]) {
			if s.waits == nil {
				s.waits = make(map[types.NamespacedName]time.Time)
			}
			s.waits[k] = next
			s.printf("%-8s   eviction of %s waits for the eviction budget until %s\n", s.offset(s.now()), k, s.offset(next.Sub(t0)))
		}
	}
	return nil
}

// advance moves time to t0+at, stopping at every eviction due on the way
// (fake clock), or waits for the clock to get there (real clock).
func (s *scenario) advance(at time.Duration) error {
	target := t0.Add(at)
	if s.fake == nil {
		if d := target.Sub(s.clk.Now()); d > 0 {
			<-s.clk.After(d)
		}
		return s.settle()
	}
	for {
		next := target
		for _, p := range s.c.ListPods() {
			if w, ok := s.m.ScheduledEviction(p.Namespace, p.Name); ok && w.NextAttempt.Before(next) {
				next = w.NextAttempt
			}
		}
		if !next.After(s.fake.Now()) {
			next = s.fake.Now()
		}
		s.fake.SetTime(next)
		if err := s.settle(); err != nil {
			return err
		}
		if !next.Before(target) {
			return nil
		}
	}
}

// playSafe is the second act: safe eviction on a fresh cluster.
func (s *scenario) playSafe() error {
	s.printf("\nPart 2: the same manager turned on safely, on a fresh cluster: the Eviction API, a fallback\n")
	s.printf("delete 3m past the deadline, an eviction budget of 1/s with bursts of 2.\n")
	s.printf("Nodes node-d, node-e, node-f. PodDisruptionBudget db: at least 2 of the app=db pods ready.\n\n")
	for _, n := range []string{"node-d", "node-e", "node-f"} {
		if err := s.c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			return err
		}
	}
	type podSpec struct {
		name, node string
		secs       int64
		note       string
	}
	pods := []podSpec{
		{"db-0", "node-d", 60, "app=db, tolerates the taint for 60s"},
		{"db-1", "node-d", 70, "app=db, tolerates the taint for 70s"},
		{"db-2", "node-d", 80, "app=db, tolerates the taint for 80s"},
	}
	for i := 1; i <= 6; i++ {
		pods = append(pods, podSpec{fmt.Sprintf("job-%d", i), "node-e", -2, "tolerates nothing"})
	}
	for _, p := range pods {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default"}, Spec: v1.PodSpec{NodeName: p.node}}
		if p.secs >= 0 {
			pod.Labels = map[string]string{"app": "db"}
			pod.Spec.Tolerations = tolerate(p.secs)
		}
		if _, err := s.c.AddPod(pod); err != nil {
			return err
		}
		if err := s.c.SetPodReady("default", p.name, true); err != nil {
			return err
		}
		s.printf("  pod %-8s on %s  ready, %s\n", p.name, p.node, p.note)
	}
	if _, err := s.c.AddPDB(&policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}); err != nil {
		return err
	}
	s.printf("\n")
	if err := s.settle(); err != nil {
		return err
	}

	// replace stands in for the db pods' ReplicaSet: a new pod on node-f
	// for each db pod gone.
	replace := func(ready bool) func() error {
		return func() error {
			for _, name := range []string{"db-0", "db-1", "db-2"} {
				if _, err := s.c.GetPod("default", name); err == nil {
					continue
				}
				repl := name + "-new"
				if _, err := s.c.GetPod("default", repl); err == nil {
					continue
				}
				if _, err := s.c.AddPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: repl, Namespace: "default",
					Labels: map[string]string{"app": "db"}}, Spec: v1.PodSpec{NodeName: "node-f"}}); err != nil {
					return err
				}
				if ready {
					if err := s.c.SetPodReady("default", repl, true); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	steps := []step{
		{0, "taint node-d and node-e (the job pods go at the budget's pace)", func() error {
			return cmp.Or(s.c.SetTaints("node-d", unreachable), s.c.SetTaints("node-e", unreachable))
		}},
		{90 * time.Second, "the ReplicaSet's replacement db-0-new is ready on node-f", replace(true)},
		{2 * time.Minute, "a replacement for the next db pod is created, but never gets ready", replace(false)},
		{10 * time.Minute, "end", nil},
	}
	if err := s.run(steps); err != nil {
		return err
	}
	left := s.podsLeft()
	st := s.m.Stats()
	s.printf("\nPods left: %v.\nEvicted %d through the Eviction API, %d by the fallback delete; %d refusals by the budget, %d waits for the eviction budget.\n",
		left, st.EvictedByAPI, st.FallbackDeleted, st.Refused, st.BudgetWaits)
	return nil
}

// step is one scripted change: at an offset from t0, what it is, and how to
// make it (nil: the end).
type step struct {
	at   time.Duration
	what string
	do   func() error
}

// run plays steps in order, settling after each.
func (s *scenario) run(steps []step) error {
	for _, st := range steps {
		if err := s.advance(st.at); err != nil {
			return err
		}
		s.action(st.what)
		if st.do == nil {
			return nil
		}
		if err := st.do(); err != nil {
			return err
		}
		if err := s.settle(); err != nil {
			return err
		}
	}
	return nil
}

func (s *scenario) podsLeft() []string {
	var left []string
	for _, p := range s.c.ListPods() {
		left = append(left, p.Name)
	}
	return left
}
