// Package oracle checks what a NoExecute taint controller did against the
// API server's own record, not the controller's word: the server's audit
// log (internal/testenv writes one) says which replica wrote what to which
// pod, when, with which UID precondition and with what answer; a watch of
// the pods, the nodes and the DRA objects (ResourceSlices, the namespace's
// ResourceClaims, DeviceTaintRules) says what each pod's deadline was.
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
// A pod's devices (those its ResourceClaims allocate while reserved for it)
// have deadlines too, modelled here from Kubernetes' rules and the
// controller's, not by calling taintkit: each NoExecute taint of an
// allocated device (in its pool's newest slices, or from a DeviceTaintRule
// that selects it) counts down from the later of its TimeAdded and the
// pod's binding, for the smallest seconds of the allocation's tolerations
// that tolerate it (an empty effect tolerates NoExecute; nil seconds: for
// ever; none: at once). The pod is due at the earlier of its node taints'
// deadline and its devices'. The guard holds a DeviceTaintRule whose
// NoExecute taint would evict more pods than --device-taint-rule-max-pods
// ([Oracle.RuleMaxPods]; computed from the objects, not read from the
// rule's status): its taint makes no pod due while held.
//
// # Checks
//
//   - never early: no delete or eviction of a pod is received before its
//     deadline, nor more than 1 s after the pod stopped being due. The
//     watches of pods, nodes and DRA objects are separate streams, so the
//     change that made a pod due may be seen with or after the terminating
//     state its eviction wrote: the states of its node and devices seen
//     within 1 s after that are judged with the pod as it was before. A
//     fault that may break the controller's watches ([Oracle.Fault]) can
//     hide a taint that left its node and came back: a watch resumed by a
//     relist sees it refreshed in place, and so keeps its first countdown.
//     A taint gone and back between the fault's start and 5 s after its
//     end may be judged either way;
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
//   - one writer: no replica writes to a pod, or to a DeviceTaintRule's
//     status, while another replica is the last to have written the Lease
//     (acquired or renewed it).
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
