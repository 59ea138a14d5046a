// Package tolerations decides whether a pod's tolerations tolerate a node's
// taints, and when a pod on a node with NoExecute taints must be evicted.
//
// It generalises three helpers of the Kubernetes NoExecute taint manager
// (v1helper.GetMatchingTolerations, getMinTolerationTime and
// getNoExecuteTaints) and adds what a controller needs around them: an
// allocation-free all-tolerated check ([TaintsTolerated]), an append variant
// ([AppendMatchingTolerations]), the reason a pod is not tolerated
// ([FirstUntoleratedTaint]), the default tolerations of the
// DefaultTolerationSeconds admission plugin ([WithDefaultTolerations]) and a
// restart-safe eviction decision ([Decide]).
//
// # Model
//
// A toleration tolerates a taint exactly as k8s.io/api's
// (*v1.Toleration).ToleratesTaint decides: an empty toleration effect matches
// every effect; an empty key (with Exists) matches every key; the empty
// operator means Equal; Exists matches every value; Lt and Gt compare the
// values as strict decimal int64 integers ("0", "7", "-12"; never "+1", "01",
// "-0", " 1" or values out of range), and only when
// [Matcher.ComparisonOperators] is set. A malformed value never matches; it
// does not panic and does not log. Unknown operators never match.
//
// Each package-level function behaves as the same method of the zero
// [Matcher]: it matches as Kubernetes does with comparison operators off, so
// Lt and Gt never match. Use Matcher{ComparisonOperators: true} to honour them.
//
// For a list of taints, the toleration used for a taint is the first toleration
// in the pod's list that tolerates it. A pod whose tolerations leave any taint
// untolerated is evicted at once; otherwise the tolerations used decide how
// long it may stay: a nil TolerationSeconds tolerates forever, a value at or
// below zero not at all.
//
// # Time
//
// The package never reads a clock: functions that need the current time take
// it as an argument (now time.Time), as golang.org/x/time/rate does, so they
// are pure and deterministic. [Decide] counts each taint's toleration from
// max(taint.TimeAdded, boundAt), where boundAt is when the pod was bound to
// the node ([PodBoundAt]), so re-running it after a controller restart gives
// the same deadline. Unknown (zero or nil) times and times after now count as
// now: they can delay an eviction, never hasten it.
//
// # Concurrency
//
// Every function and method is safe for concurrent use by multiple goroutines,
// provided the caller does not modify the slices it passes in while the call
// runs. No function modifies its arguments (AppendMatchingTolerations writes
// only past len(dst), into the slice it returns). No returned slice aliases
// the caller's taints or tolerations, with one documented exception:
// [WithDefaultTolerations] returns its argument, clipped, when it has nothing
// to add.
//
// # Cost
//
// [Matcher.ToleratesTaint], [TaintsTolerated], [FirstUntoleratedTaint],
// [MinTolerationTime] and [Decide] do not allocate.
// [GetMatchingTolerations] allocates at most once (the result, sized exactly);
// [AppendMatchingTolerations] allocates only when dst lacks capacity. Matching
// n taints against m tolerations costs O(n·m) comparisons.
package tolerations
