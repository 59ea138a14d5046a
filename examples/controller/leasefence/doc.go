// Package leasefence keeps a replica that may no longer lead a Lease from
// writing, at the place its requests leave the process, and from releasing
// a Lease another replica holds.
//
// # Model
//
// A [Fence] is given the renew deadline of a leader election and wraps its
// lock ([Fence.Lock]). It records when the last write of the Lease that
// named this replica and succeeded was sent. Until a renew deadline after
// that, the replica may write; from then on it may not. Another replica
// takes the Lease over at the earliest a lease duration after it saw that
// write, and the renew deadline is shorter.
//
// [Fence.Wrap] is a transport wrapper for [rest.Config.Wrap]: on a client
// that writes pods or events, it checks the fence for every such write
// (pods and their subresources, core and events.k8s.io events, and
// DeviceTaintRules, whose status a device taint controller writes) as the
// request leaves for the network, after client-go's rate limiter and on
// each of client-go's retries. A write the fence refuses never leaves: it
// fails with an error that wraps [ErrExpired], as a request whose
// connection was lost does. Reads and every other request pass.
//
// The lock's release (client-go's ReleaseOnCancel) writes only if the
// record it has just read names this replica; the API server refuses the
// write if the Lease changed after that read (its resourceVersion). So a
// replica whose view of the Lease is stale, after a pause, never empties
// the Lease of the replica that took it over.
//
// # Time
//
// The age of the last renewal is measured on the monotonic clock and on
// the wall clock, and the larger counts: a process paused (SIGSTOP, a
// stop-the-world pause, a throttled container) sees both move on, but a
// suspended virtual machine's monotonic clock stands still while the wall
// clock, once corrected, does not. A wall clock stepped forward makes the
// replica stop early; stepped back, the monotonic clock still decides.
//
// # What it cannot close
//
// A check made just before a request leaves is still made before it
// leaves: a pause between the check and the write to the connection, or a
// request delayed in the network or the API server's queue, reaches the
// server late. The fence narrows that window from the duration of a
// request, its rate limiting and its retries to that of a few
// instructions; it does not close it. Only the API server could, and it
// does not check leases.
package leasefence
