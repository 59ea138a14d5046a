// Package manager is a complete NoExecute taint manager built from taintkit's
// three packages: it evicts pods from nodes with NoExecute taints they do not
// tolerate, at once or when their toleration runs out, as the Kubernetes
// taint-eviction controller does.
//
// It is reference code for embedding taintkit in a controller. Feed it
// informer events ([Manager.NodeUpdated], [Manager.PodUpdated]), give it
// lister-shaped lookups and a [PodClient], and call [Manager.Run].
//
// # Model
//
// Events are filtered as the original filters them: a node update matters
// only if its NoExecute taints changed, a pod update only if its node name,
// tolerations or UID changed; additions and deletions always matter. Pods
// with no node name (unscheduled) are ignored: no taint can apply to them.
//
// What remains goes into a [sharding.Dispatcher]: node names in the high
// lane, pods in the low lane, both sharded by node name. A node and the pods
// on it are therefore handled by one worker, one at a time, and a node's
// update is handled before its pods' updates queued with it. That does not
// hold across nodes: a pod that moves, or is deleted and recreated under the
// same name on another node, is decided by the new node's worker while the
// old node's worker may still act on what it read before. So after acting
// on a pod a handler reads it again, and if it is now another pod or on
// another node, queues it for its current node, whose worker decides last.
//
// Handling is level-triggered: a handler reads the current node and pod from
// the listers (not the event's objects) and asks [tolerations.Matcher.Decide]
// what to do with each pod:
//
//   - EvictNow (a NoExecute taint is not tolerated, or a toleration ran out):
//     schedule the eviction at once;
//   - EvictAt: schedule it in a [timedqueue.TimedWorkerQueue] keyed by the
//     pod's namespace and name, at the absolute deadline Decide gives
//     (unless an earlier one stands: see Time);
//   - Never (no NoExecute taint, or every one tolerated forever): cancel any
//     scheduled eviction, recording a "Cancelling deletion" event.
//
// A deleted pod, a pod moved to another node and the pods of a deleted node
// have their evictions cancelled the same way. (A delete of a pod the manager
// holds nothing for, such as one its eviction removed, is done without a
// read; a pod added again under the name is decided by its own update.)
//
// The eviction (the timed queue's work func) re-checks everything when it
// fires: it fetches the pod (gone: done), skips it if it is already
// terminating, and decides again from its node's current taints and its
// current tolerations. If there is no deadline any more it is dropped. If
// the deadline it fired for ended the countdown of a taint still on the
// node, the pod goes, whatever its tolerations say now short of forever
// (see Time). If there is a later deadline for another reason (a new pod
// under the same name, or the taint went away and another ends later), the
// pod is handed back to its node's shard, whose handler schedules it again.
// It hands back rather than drops because nothing else might: the handlers
// only run on changes, and a pod recreated under the same name, whose
// events an informer may coalesce into one update, gets its own countdown
// only this way. Only handlers schedule; a handler that decides while an
// eviction is running withdraws that attempt and schedules anew, so an
// attempt that read older objects cannot undo a newer decision. If the
// eviction is due, it records a "Marking for deletion" event, sets the pod's
// DisruptionTarget condition (reason DeletionByTaintManager) and deletes the
// pod with a UID precondition set to the UID it just read: a pod recreated
// under the same name in the meantime is never deleted by its predecessor's
// eviction (the original keyed evictions by name only:
// kubernetes/kubernetes#107543, #125332). NotFound counts as success; other
// errors, a UID conflict included, are retried by the timed queue with
// exponential backoff, and each retry decides afresh.
//
// # Devices
//
// With [Config.Devices], a pod's decision is one for its node's taints and
// the taints of the DRA devices allocated to it together
// ([tolerations.Countdowns.DecideWithDevices]): the earliest wins, and a
// change that ends one countdown (a node's taint leaving, a device's taint
// leaving) cancels nothing while the other runs. [Manager.DevicesChanged]
// decides a pod again when its devices' taints may have changed. An
// eviction a device's taint decided goes through the same queue, budgets,
// Eviction API and dry run as a node's; its events have the reason
// DeviceTaintManagerEviction and name the device and the DeviceTaintRule,
// and the DisruptionTarget condition's reason is
// DeletionByDeviceTaintManager.
//
// # Safe eviction
//
// Each of these is a [Config] field, off by default (upstream behaviour):
//
//   - UseEvictionAPI evicts through the Eviction API (a [PodEvicter]), which
//     honours PodDisruptionBudgets. A budget's refusal (a 429 with a
//     DisruptionBudget cause, [IsRefusedByBudget]; a 429 without it is API
//     throttling, an ordinary failure) is not a failure: it is retried with
//     EvictionRetry's backoff without using up its MaxAttempts, each retry
//     deciding afresh (a pod that became tolerated is left alone), holding no
//     eviction slot while it waits, and the deadline stays where it was.
//     EvictionFallbackAfter past the deadline, a refused eviction becomes a
//     direct delete (DisruptionTarget set first), with a warning event and a
//     count in [Stats].FallbackDeleted; zero means never.
//   - EvictionRate and EvictionBurst bound the evictions started per second
//     (a token bucket on Clock; one per namespace with
//     EvictionRatePerNamespace). Due evictions wait for a token in the eviction
//     queue, holding no slot, in deadline order within their bucket; none is
//     lost, none starves, and one bucket's wait never holds back another's.
//     The wait is counted ([Stats].BudgetWaits), observed ([Metrics]) and
//     logged at -v 2.
//   - DryRun decides, schedules, waits for budgets and counts as for real,
//     but records a "would delete" event (once per pod UID) where a real run
//     would write; for the same history its decisions and their times are a
//     real run's.
//
// Countdowns are visible: an event when one starts or moves ("Scheduled for
// deletion at T: taint K=V:NoExecute not tolerated after N s"), and
// [Manager.Pending], a snapshot of every scheduled eviction with its pod,
// node, taint, deadline, attempts and last error.
//
// # Time
//
// Each NoExecute taint's countdown starts at max(taint.TimeAdded, the pod's
// PodScheduled time) and ends after the toleration's seconds; the pod is
// evicted when the first countdown ends ([tolerations.Matcher.Decide]). When
// a time is not recorded (a taint with no TimeAdded, as kubelet's
// --register-with-taints sets it; a pod created with its node name set,
// which has no PodScheduled condition), the manager uses the time it first
// saw the taint on the node, or the pod on its node, which a
// [tolerations.Countdowns] remembers ([Config.Countdowns]). So every
// countdown ends, however often the pod is decided again.
//
// While a countdown runs, its deadline moves later only when its taint (key
// and effect) leaves the node or the pod is replaced (new UID, or another
// node): a longer tolerationSeconds does not postpone an eviction, as the
// original keeps its first schedule, while a shorter one or a new, stricter
// taint brings it earlier. Tolerating every taint forever, or the last
// NoExecute taint leaving, cancels it.
//
// Deadlines are restart-safe: a new Manager (after a controller restart)
// computes the same deadlines from the recorded times and does not restart
// anyone's countdown, with one exception: a countdown whose start was not
// recorded restarts from the new Manager's first sight, as the original's
// countdowns all do. (A deadline kept despite a longer toleration is
// recomputed from the current tolerations too.) All waiting is on the
// [clock.Clock] in [Config]; nothing reads the wall clock.
//
// Memory: besides the eviction queue's entry, a pod with a scheduled eviction
// (or with no PodScheduled time) costs a 40-byte slot in the Countdowns,
// forgotten when the pod goes, or when it is decided again after its node's
// NoExecute taints go; a pod the manager removed costs 16 bytes until its
// informer shows the deletion; a node with NoExecute taints costs a copy of
// them. These maps, the eviction budget's and the dispatcher's lanes are
// rebuilt when they shrink to a quarter of their
// peak, so a node failure's peak does not stay. Logs
// and events cost nothing when off: their arguments are built only when a
// line is logged or a Recorder is set.
//
// # Concurrency
//
// A [Manager] is safe for concurrent use by multiple goroutines.
// NodeUpdated and PodUpdated never block. The manager runs Shards handler
// goroutines and at most MaxConcurrentEvictions evictions at once, whatever
// the number of pods: a node failure with 100,000 pods does not start 100,000
// goroutines or API calls.
//
// # Testing with a fake clock
//
// Give [Config] a k8s.io/utils/clock/testing.FakeClock and settle with
// testing/synctest, or, outside a synctest bubble, set [Config.TrackIdle] and
// call [Manager.WaitIdle] after each change or clock step: it returns once
// every queued update is handled and every due eviction has run.
package manager
