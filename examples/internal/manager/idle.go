package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
)

// idleTracker observes the manager's outstanding work for WaitIdle, with no
// sleeping and no polling. Work is outstanding while:
//
//  1. an update is queued in the dispatcher (Dispatcher.Len) or a handler is
//     running (counted by wrapping the handlers);
//  2. an eviction attempt is in flight (the eviction queue's running gauge,
//     which it updates after each state change, so it is never zero while an
//     attempt's side effects are still to come);
//  3. an eviction is due but has not started: a key we scheduled whose
//     NextAttempt is at or before now (GetWorker on the keys we scheduled).
//
// Waiting for a future fire time or a retry backoff is not outstanding work:
// it waits for the clock, which the caller moves.
//
// One gap is left by the first rule: when an update is added for an item
// while that item is being handled, the dispatcher queues it again after
// the handler returns, a moment after our wrapper has seen the handler end.
// WaitIdle closes it with a barrier: it sends a probe through every shard's
// high lane; a worker takes its probe only after it has finished with its
// previous item, requeue included.
//
// Every method is a no-op on a nil *idleTracker (TrackIdle off).
type idleTracker struct {
	probes []string // probes[i] is a node name that shards to shard i

	waitMu sync.Mutex // one WaitIdle at a time

	mu       sync.Mutex
	handling int    // handlers running, probes included
	running  int    // eviction attempts in flight, from the queue's gauge
	probing  int    // probes sent and not yet handled
	starts   uint64 // handlers (not probes) and eviction attempts started so far
	keys     map[types.NamespacedName]struct{}
	keysPeak int           // for rebuildIfShrunk
	changed  chan struct{} // closed and replaced whenever a count goes down
}

// probePrefix starts every probe's name. Node names are DNS subdomains and
// never contain a NUL, so a probe is never mistaken for a node.
const probePrefix = "\x00idle-probe-"

func newIdleTracker(shards int) *idleTracker {
	t := &idleTracker{
		probes:  make([]string, shards),
		keys:    make(map[types.NamespacedName]struct{}),
		changed: make(chan struct{}),
	}
	// Find one node name per shard: the dispatcher routes by ShardFor.
	for found, i := 0, 0; found < shards; i++ {
		name := fmt.Sprintf("%s%d", probePrefix, i)
		if s := sharding.ShardFor(name, shards); t.probes[s] == "" {
			t.probes[s] = name
			found++
		}
	}
	return t
}

// notifyLocked wakes WaitIdle. t.mu must be held.
func (t *idleTracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// scheduled records that an eviction was scheduled for key.
func (t *idleTracker) scheduled(key types.NamespacedName) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.keys[key] = struct{}{}
	t.keysPeak = max(t.keysPeak, len(t.keys))
	t.mu.Unlock()
}

// track wraps a handler so that its runs are counted, and probes answered.
func track[T any](t *idleTracker, isProbe func(T) bool, h func(context.Context, T) error) func(context.Context, T) error {
	if t == nil {
		return h
	}
	return func(ctx context.Context, item T) error {
		probe := isProbe(item)
		t.mu.Lock()
		t.handling++
		if !probe {
			t.starts++
		}
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			t.handling--
			t.notifyLocked()
			t.mu.Unlock()
		}()
		if probe {
			t.mu.Lock()
			t.probing--
			t.mu.Unlock()
			return nil
		}
		return h(ctx, item)
	}
}

func (m *Manager) trackHigh(h func(context.Context, string) error) func(context.Context, string) error {
	return track(m.idle, func(node string) bool { return strings.HasPrefix(node, probePrefix) }, h)
}

func (m *Manager) trackLow(h func(context.Context, podUpdate) error) func(context.Context, podUpdate) error {
	return track(m.idle, func(podUpdate) bool { return false }, h)
}

// runningGauge is the eviction queue's running gauge when TrackIdle is set.
type runningGauge struct{ t *idleTracker }

func (g runningGauge) Inc() {
	g.t.mu.Lock()
	g.t.running++
	g.t.starts++
	g.t.mu.Unlock()
}

func (g runningGauge) Dec() {
	g.t.mu.Lock()
	g.t.running--
	g.t.notifyLocked()
	g.t.mu.Unlock()
}

// idleMetrics gives the eviction queue our running gauge, teed with next's
// (Config.QueueMetrics, may be nil), and next's other metrics.
type idleMetrics struct {
	t    *idleTracker
	next timedqueue.MetricsProvider
}

func (p idleMetrics) NewDepthMetric(n string) timedqueue.Gauge {
	if p.next == nil {
		return nil
	}
	return p.next.NewDepthMetric(n)
}
func (p idleMetrics) NewRunningMetric(n string) timedqueue.Gauge {
	if p.next != nil {
		if g := p.next.NewRunningMetric(n); g != nil {
			return teeGauge{runningGauge{p.t}, g}
		}
	}
	return runningGauge{p.t}
}
func (p idleMetrics) NewAddsMetric(n string) timedqueue.Counter {
	if p.next == nil {
		return nil
	}
	return p.next.NewAddsMetric(n)
}
func (p idleMetrics) NewRetriesMetric(n string) timedqueue.Counter {
	if p.next == nil {
		return nil
	}
	return p.next.NewRetriesMetric(n)
}
func (p idleMetrics) NewFailuresMetric(n string) timedqueue.Counter {
	if p.next == nil {
		return nil
	}
	return p.next.NewFailuresMetric(n)
}
func (p idleMetrics) NewDropsMetric(n string) timedqueue.Counter {
	if p.next == nil {
		return nil
	}
	return p.next.NewDropsMetric(n)
}
func (p idleMetrics) NewLatenessMetric(n string) timedqueue.Histogram {
	if p.next == nil {
		return nil
	}
	return p.next.NewLatenessMetric(n)
}
func (p idleMetrics) NewDurationMetric(n string) timedqueue.Histogram {
	if p.next == nil {
		return nil
	}
	return p.next.NewDurationMetric(n)
}

type teeGauge struct{ a, b timedqueue.Gauge }

func (g teeGauge) Inc() { g.a.Inc(); g.b.Inc() }
func (g teeGauge) Dec() { g.a.Dec(); g.b.Dec() }

// busy reports whether work is outstanding, and returns the channel closed at
// the next change.
func (m *Manager) busy() (bool, <-chan struct{}) {
	t := m.idle
	// Take the channel before looking at anything: a change made after this
	// point closes it, so a wake-up cannot be lost between the look and the
	// wait.
	t.mu.Lock()
	changed := t.changed
	t.mu.Unlock()
	queued := m.dispatcher.Len() // not under t.mu: Len takes the shards' locks
	t.mu.Lock()
	defer t.mu.Unlock()
	if queued > 0 || t.handling > 0 || t.running > 0 || t.probing > 0 {
		return true, changed
	}
	now := m.clock.Now()
	// Rebuilt after the loop (a return ends it), never while ranging it.
	defer func() { t.keys = rebuildIfShrunk(t.keys, &t.keysPeak) }()
	for k := range t.keys {
		w, ok := m.evictions.GetWorker(k)
		switch {
		case !ok:
			delete(t.keys, k) // done, dropped or cancelled
		case w.Running || !w.NextAttempt.After(now):
			return true, changed
		}
	}
	return false, changed
}

// WaitIdle returns once no update is queued or being handled and no eviction
// is due or running, as read from the manager's clock: everything the
// changes and clock steps made before the call have caused is done. It waits
// on notifications, never by sleeping or polling. Evictions waiting for their
// fire time or for a retry backoff, and updates waiting for a retry (a lister
// error), do not count: they wait for the clock.
//
// It requires [Config.TrackIdle] and a running manager, and returns
// ctx.Err() if ctx ends first. Changes made concurrently with WaitIdle may or
// may not be waited for. WaitIdle is meant for tests and demos on a fake
// clock; calls are serialised.
func (m *Manager) WaitIdle(ctx context.Context) error {
	t := m.idle
	if t == nil {
		return errors.New("manager: WaitIdle needs Config.TrackIdle")
	}
	t.waitMu.Lock()
	defer t.waitMu.Unlock()
	for {
		if err := m.waitQuiet(ctx); err != nil {
			return err
		}
		// Looks idle. Send a probe through every shard and wait for all of
		// them: a requeue a worker was about to do is then visible in Len,
		// and waited for. Idle is confirmed when no work at all started
		// meanwhile; otherwise the new work may have a gap of its own.
		t.mu.Lock()
		t.probing += len(t.probes)
		starts := t.starts
		t.mu.Unlock()
		for _, p := range t.probes {
			m.dispatcher.AddHigh(p)
		}
		if err := m.waitQuiet(ctx); err != nil {
			return err
		}
		t.mu.Lock()
		quiet := t.starts == starts
		t.mu.Unlock()
		if quiet {
			return nil
		}
	}
}

// waitQuiet waits until busy reports false once.
func (m *Manager) waitQuiet(ctx context.Context) error {
	for {
		busy, changed := m.busy()
		if !busy {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var _ timedqueue.MetricsProvider = idleMetrics{}
