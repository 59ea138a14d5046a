// Package podcache keeps what a taint-eviction controller reads of a pod,
// so that its pod informer need not cache whole pods.
//
// [Trim] returns a copy of a pod holding only that: decisions of the
// tolerations package on it are those on the whole pod. A [Record] holds
// the same in about a fifth of the memory, for the largest clusters: cache
// records with client-go's informers.WithTransform([Transform]), and turn
// one back into the trimmed pod with [Record.Pod] when a pod is needed.
package podcache
