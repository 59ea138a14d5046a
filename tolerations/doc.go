// Package tolerations matches a pod's tolerations against a node's taints
// exactly as Kubernetes does, and decides when a pod on a NoExecute-tainted
// node must be evicted: now, at a time, or never ([Decide]). It generalises
// the Kubernetes taint manager's GetMatchingTolerations, getMinTolerationTime
// and getNoExecuteTaints. Only NoExecute taints evict: to ask about eviction,
// match [GetNoExecuteTaints] of a node's taints.
//
// Nothing here reads a clock: [Decide] takes now as an argument, as
// golang.org/x/time/rate does. Every function is safe for concurrent use while the caller does not modify
// the slices it passed in. No function modifies its arguments, and no result
// shares a backing array with them (except [WithDefaultTolerationsSeconds]'s
// when it adds nothing); pointers inside elements are shared, as in
// Kubernetes. Matching n taints against m tolerations is O(n·m) comparisons;
// [Matcher.ToleratesTaint], [TaintsTolerated], [FirstUntoleratedTaint],
// [MinTolerationTime] and [Decide] do not allocate.
package tolerations
