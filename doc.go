// Package taintkit is the overview of a small library that takes the three
// clever parts of Kubernetes' NoExecute taint manager and makes each a
// generic, well-tested package, usable alone and driven by an injectable
// clock ([k8s.io/utils/clock.Clock]).
//
// This package holds no code; the work is done by its three sub-packages.
//
// # The packages
//
// Reach for [github.com/taintkit/taintkit/timedqueue] when work must run for a
// key no earlier than a given time, with cancel, reschedule (earlier or later)
// and retry with backoff. One timer and a compact heap serve millions of
// pending keys; a bounded pool of workers runs what is due, in order of each
// schedule's next attempt (its fire time, or its retry time after a failure).
//
// Reach for [github.com/taintkit/taintkit/tolerations] to decide whether a
// pod's tolerations tolerate a node's taints, exactly as Kubernetes does, and
// when a pod on a NoExecute-tainted node must go: now, at a time, or never.
// Its eviction decision is restart-safe: the countdown runs from when the
// taint was added (or the pod was bound), not from when a controller happened
// to see it.
//
// Reach for [github.com/taintkit/taintkit/sharding] to handle two kinds of
// updates on N workers, sharded by a stable hash of a key, with every queued
// high-priority item of a shard handled before its next low-priority item.
// Adding never blocks, whatever any shard is doing.
//
// # Composed
//
// A NoExecute taint manager wires them together (examples/noexecute is the
// complete, runnable version). Node and pod updates go into a sharding
// Dispatcher: nodes in the high lane, pods in the low lane, both sharded by
// node name, so a node and its pods are handled by one worker and a node's
// taints are always applied before its pods' updates. The node handler lists
// the node's pods and asks tolerations for each pod's eviction decision. A pod
// that tolerates nothing is evicted at once; a pod that tolerates every taint
// for a while gets a timedqueue schedule keyed by its namespace and name, at
// the absolute time the decision gives; a pod tolerating forever gets none.
// When a taint goes away, or the pod is deleted or moves, the schedule is
// cancelled. When a schedule fires, the eviction re-reads the pod and its
// node, re-decides, and deletes with a UID precondition; a failed delete is
// retried by the timedqueue with exponential backoff.
//
// # Time
//
// Every scheduler takes a [k8s.io/utils/clock.Clock] and never reads the
// wall clock itself, so tests drive it with
// [k8s.io/utils/clock/testing.FakeClock] and testing/synctest: no sleeps, no
// flaky timing. Pure time arithmetic (the tolerations package) takes now as an
// argument and needs no clock at all.
//
// # Options and Config
//
// timedqueue is configured with options, because most callers set none:
// timedqueue.New(work) is a working queue. sharding is configured with a
// Config struct, because a dispatcher needs its handlers and key funcs, and
// a struct shows the required and the optional fields in one place. Both
// check their configuration in New and return an error. What the two have in
// common has one shape in both: a RetryPolicy (the same fields, defaults and
// Backoff), a PanicError and ErrGoexit for failed attempts, and a
// MetricsProvider whose metrics are made for the instance's name
// (timedqueue.WithName, sharding's Config.Name) and, in sharding, a lane.
//
// # Metrics and hooks
//
// timedqueue's and sharding's MetricsProviders share method names (New…Metric),
// but not every name counts the same thing in both. What each counts, read
// from the code (sharding's per lane; durations in seconds on the clock):
//
//	metric          timedqueue                      sharding
//	Depth           schedules not running: pending, items queued: not being
//	                backing off, deferred (RetryAt, handled nor waiting for
//	                admit func) or waiting for a    a retry (Dispatcher.Len)
//	                withdrawn attempt
//	Backoff *       schedules not running with a    items waiting for a retry
//	                failed attempt; part of Depth   (not part of Depth)
//	Running         slots held: attempts in flight, —
//	                withdrawn ones, hook calls
//	Adds            schedules made by AddWork or    —
//	                by UpdateWork (new or moved)
//	Retries         failed attempts whose retry is  failed attempts whose retry
//	                armed (not RetryAt deferrals)   is scheduled
//	Failures        schedules whose last attempt    Failures *: items whose
//	                failed: MaxAttempts, Permanent, last attempt failed
//	                or failed after Shutdown        (MaxAttempts)
//	Drops           schedules Shutdown dropped      Failures + ShutdownDrops
//	                before they ran, or deferred    + Refusals
//	                (RetryAt) after it
//	ShutdownDrops * —: Drops is this                items Run dropped at
//	                                                shutdown, queued or waiting
//	                                                for a retry
//	Refusals *      —: AddWork and UpdateWork       adds refused: after Run
//	                report it by returning false    stopped, invalid items,
//	                                                key func panics
//	Lateness        start − FireAt of a schedule's  —
//	                first attempt
//	Duration        each admitted attempt's work    each attempt's handler
//	                func
//
// A metric marked * is made only by a provider that implements an optional
// interface: timedqueue.BackoffMetricsProvider, sharding.BackoffMetricsProvider
// and sharding.DropCauseMetricsProvider (an interface method added to
// MetricsProvider would break every provider written for v1). So a dashboard
// that puts the two side by side compares timedqueue's Depth with sharding's
// Depth + Backoff, timedqueue's Failures with sharding's Failures, and
// timedqueue's Drops with sharding's ShutdownDrops. An attempt that fails
// while shutting down differs: timedqueue counts it in Failures and retries
// it no more; sharding counts no failure and drops the item (ShutdownDrops).
//
// The hooks, which must not block:
//
//	hook            timedqueue                      sharding
//	on a failure    SetFailureHook: each of         Config.OnDrop, Err wrapping
//	                Failures, once the key is free  the last error: Failures
//	on a drop       —: logged with their number     Config.OnDrop, Err
//	                                                ErrStopped: ShutdownDrops;
//	                                                never a refusal
//	on a retry      SetRetryHook: each of Retries   —
//
// # Logging
//
// The packages that log (timedqueue, sharding and the example manager) take a
// [github.com/go-logr/logr.Logger] by one rule: a logger that is not given (no
// WithLogger option; a nil *logr.Logger Config field) means
// [k8s.io/klog/v2.Background]; a given logr.Logger is used as is, so
// logr.Discard() silences. A Config field is a pointer because the zero
// logr.Logger is logr.Discard(): a plain field could not tell "not set" from
// "silence".
package taintkit
