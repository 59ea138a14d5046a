// Package oracle checks what a NoExecute taint controller did against the
// API server's own record, not the controller's word: the server's audit
// log (internal/testenv writes one) says which replica wrote what to which
// pod, when, with which UID precondition and with what answer; a watch of
// the pods and nodes says what each pod's deadline was.
//
// # Deadlines
//
// A pod's deadline is computed here from the history the watch saw, by the
// rule the controller promises: each NoExecute taint on the pod's node that
// the pod does not tolerate for ever counts down from the later of the
// taint's TimeAdded and the pod's PodScheduled time, for the seconds of the
// first toleration that tolerates it (none: at once); the pod is due when
// the first countdown ends. A start the objects do not record (a taint with
// no TimeAdded, a pod with no PodScheduled condition) counts from when the
// watch first saw it, and checks allow 1 s either way for it. A deadline
// moves later only when the taint it counts down for leaves the node (a
// longer toleration does not postpone it); an earlier one replaces it.
// Matching is k8s.io/api's Toleration.ToleratesTaint, not taintkit's.
//
// # Checks
//
//   - never early: no delete or eviction of a pod is received before its
//     deadline, nor more than 1 s after the pod stopped being due;
//   - never lost: a pod that stays due has a deletionTimestamp by its
//     deadline + 2 s; when a fault was active then, by the fault's end plus
//     5 s ([Oracle.Fault]), or, for a fault that only slowed requests, by
//     its deadline + 2 s + the slowness ([Oracle.Slow]); unless a
//     disruption budget refused its eviction (429) by then ([Report].Held)
//     or the controller said it gave up ([Oracle.Excuse]);
//   - never twice: every write of the controller to a pod carries the UID
//     precondition of the pod it decided for; a pod UID is deleted or
//     evicted again only after the server refused the previous request or
//     its answer was lost ([Oracle.AnswerLost], or a server killed before
//     it answered);
//   - one writer: no replica writes to a pod while another replica is the
//     last to have written the Lease (acquired or renewed it).
//
// The controller's requests are told by their User-Agent,
// "taintkit-noexecute/VERSION (IDENTITY)"; a write to a pod by the
// controller's ServiceAccount with another User-Agent is a violation too.
//
// # Usage
//
// Start the Oracle before the objects and the controller, act, wait for
// what the test waits for, then call [Oracle.Verify]: it stops the watches,
// reads the audit log and fails the test for each violation.
package oracle
