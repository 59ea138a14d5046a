// Package tolerations matches a pod's tolerations against a node's taints
// exactly as Kubernetes does, and decides when a pod on a NoExecute-tainted
// node must be evicted: now, at a time, or never.
//
// Most callers should make one [Countdowns] when they start, feed it every
// node and pod event on every replica ([Countdowns.ObserveNode],
// [Countdowns.ObservePod], [Countdowns.ObservePodDeleted],
// [Countdowns.ForgetNode]), and, where the replica acts, call its Decide on
// every update of a node and of a pod on it: a toleration counts from when
// its taint was added or the pod bound, or from first sight where Kubernetes
// did not record it, and a deadline moves later only when its taint leaves,
// so the eviction comes however often the pod is decided again, and a
// standby that takes over decides the deadlines the leader had.
// [Decide] is the rule, for one decision; [GetMatchingTolerations],
// [MinTolerationTime] and [GetNoExecuteTaints] are upstream's helpers;
// [AppendMatchingTolerations] matches for hot paths.
//
// Device taints (Dynamic Resource Allocation) decide in the same shape:
// [DeviceTaints] holds the taints of a cluster's devices, [AppendClaimDevices]
// lists a pod's allocated devices with them, [DecideDevices] is the rule, and
// [Countdowns.DecideWithDevices] makes one decision of a pod's node and device
// taints, so that neither cancels the other.
//
// A controller's informer need not cache whole pods: [TrimPod] keeps what
// these functions (and an eviction's events) read, and a [PodRecord] holds
// the same in a fifth of that memory, for the largest clusters
// (informers.WithTransform([RecordPods]); [PodRecord.Pod] gives the pod back).
//
// Only a Countdowns reads a clock. Every function is safe for concurrent use
// while the caller does not modify the slices it passed in, and modifies none;
// a result shares no backing array with them (but may with the argument of
// [WithDefaultTolerationsSeconds]), only pointers inside elements, as in
// Kubernetes. Matching n taints against m tolerations is O(n·m) comparisons;
// [Matcher.ToleratesTaint], [TaintsTolerated], [FirstUntoleratedTaint],
// [MinTolerationTime] and [Decide] do not allocate.
package tolerations
