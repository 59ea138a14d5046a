// Package sched is the storage of a queue of keys waiting for a time, shared
// by timedqueue and the workqueue module: a [Slab] of entries, an [Index] from
// key to slot, a [Heap] of [Node]s ordered by a 12-byte time key, the
// [Moment]. A queue keeps its entries in the slab and says what they mean;
// sched holds no key semantics, no lock and no clock.
//
// The workqueue module imports it across the module boundary (Go's internal
// rule is path-based): its API changes only compatibly, as an exported one
// would, for as long as a released workqueue imports it.
package sched
