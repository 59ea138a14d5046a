// Package sharding dispatches items to a fixed set of workers by a stable
// hash of a shard key, in two priority lanes, so that items with the same key
// are handled one at a time and high-priority items go first.
//
// It generalises the worker loop of Kubernetes' NoExecute taint manager
// (node updates before pod updates, a pod keyed by its node's name), with
// adds that never block, deduplication, and retries with backoff.
//
// Most callers set only the four required [Config] fields, call [New], start
// [Dispatcher.Run] in a goroutine, and add items from their event handlers; a
// handler returns an error to have its item retried.
//
// # Model
//
// A [Dispatcher] has Config.Shards shards, each with one worker and two FIFO
// lanes. An item goes to shard [ShardFor](key, Shards), where key is what
// Config.HighKey or Config.LowKey returns for it. A worker handles one item at a
// time: the first queued high item if any (Config.MaxHighBurst can bound how
// long low items wait), else the first queued low item.
//
// An item (items are comparable) is queued, being handled, or waiting for a
// retry, never two at once. [Dispatcher.AddHigh] and [Dispatcher.AddLow] do:
//
//	add while the item is…   effect
//	absent                   queued at the back of its lane
//	queued                   nothing (handled once)
//	being handled            queued once more at the back when the handling
//	                         ends, success or failure, attempts reset
//	waiting for a retry      the retry is cancelled; queued now at the back,
//	                         attempts reset
//
// A failed attempt (see Config.HandleHigh) is retried after the wait
// Config.Retry gives ([RetryPolicy]), on Config.Clock: when due, the item is queued at the back of
// its lane, as if added at that instant. While it waits, it holds back
// neither lane.
// After the last attempt the item is dropped: logged, counted and passed to
// Config.OnDrop. [Dispatcher.Run] says what happens at shutdown.
//
// # Concurrency
//
// All methods are safe for concurrent use. An add takes only its shard's
// mutex, for amortised O(1) work, so a slow or stuck shard delays only its
// own items. No lock is held while a handler, key func, hook or metric runs,
// so handlers and hooks may add items. An item is never handled concurrently
// with itself, nor with any item of the same shard key. Run runs Shards
// worker goroutines and one retry goroutine; a retry costs O(log r) for r
// waiting retries.
//
// # Memory
//
// A lane's memory follows the number of items it holds, down as well as up:
// once a burst of a million items is handled, its memory is given back, even
// while a few items still wait for a retry. Giving it back is amortised O(1)
// per item.
//
// # Testing with a fake clock
//
// Pass a [k8s.io/utils/clock/testing.FakeClock] as Config.Clock, run the test
// in synctest.Test, and Step the clock to make retries come due. Cancel Run's
// context in t.Cleanup and wait for Run: synctest then checks for leaks.
package sharding
