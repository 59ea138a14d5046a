// Package scale runs the noexecute manager against many nodes and pods at
// once and measures it: how long evicting every pod takes, and the peak
// goroutines and heap on the way. The demo's -nodes flag and the manager's
// benchmark use it.
//
// The run taints every node with a NoExecute taint no pod tolerates, all at
// once, so every pod is evicted at once: the worst case of the original,
// which started one goroutine per pod. Time is read from a fake clock that
// never moves, unless Options.RealClock is set; elapsed times are wall-clock.
//
// [Replay] makes the same writes to the same cluster without a manager. The
// manager's own heap is Run's peak heap minus Replay's ([ManagerHeap]): the
// in-memory cluster, its garbage and the collector's headroom over it are in
// both.
package scale
