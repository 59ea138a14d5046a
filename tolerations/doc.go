// Package tolerations matches a pod's tolerations against a node's taints
// as Kubernetes does, and decides when a pod must be evicted for the
// NoExecute taints of its node or of its DRA devices: now, at a time, or
// never. [Decide] is the rule for one decision, [Countdowns] for a controller that
// decides again on every update; [GetMatchingTolerations],
// [MinTolerationTime] and [GetNoExecuteTaints] are upstream's helpers.
//
// Device taints (resource.k8s.io/v1) decide in the same shape
// ([DecideDevices], [Countdowns.DecideWithDevices]) and match as Kubernetes
// does ([ToleratesDeviceTaint]), but the decision differs from Kubernetes'
// device-taint-eviction controller on purpose in two rules, which
// [DecideDevices] states: a toleration with an empty effect tolerates
// NoExecute, and a countdown starts no earlier than the pod's binding. Which
// claims are a pod's, and which taints their devices have, the caller reads.
//
// Only a Countdowns reads a clock. Every function is safe for concurrent use
// while the caller does not modify the slices it passed in, and modifies none;
// a result shares no backing array with them (but may with the argument of
// [WithDefaultTolerationsSeconds]), only pointers inside elements, as in
// Kubernetes. Matching n taints against m tolerations is O(n·m) comparisons;
// [Matcher.ToleratesTaint], [TaintsTolerated], [FirstUntoleratedTaint],
// [MinTolerationTime] and [Decide] do not allocate.
package tolerations
