// Package sharding dispatches items to a fixed set of workers by a stable
// hash of a shard key, in two priority lanes, so that items with the same key
// are handled one at a time and high-priority items go first.
//
// It generalises the Run/worker loop of Kubernetes' NoExecute taint manager,
// where node updates (high) and pod updates (low, keyed by their node's name)
// go to the same worker and every queued node update is handled before the
// next pod update. Unlike the original, an add never blocks (the original's
// single dispatcher goroutine stalled every shard behind one full shard
// channel), items are deduplicated inside the dispatcher, handlers may fail
// and are retried with backoff, low items can be protected from starvation,
// and the dispatcher reports metrics and logs.
//
// # Model
//
// A [Dispatcher] has Config.Shards shards. An item goes to shard
// fnv1a32(key) % Shards, where key is Config.HighKey or Config.LowKey of the
// item and fnv1a32 is the 32-bit FNV-1a hash: the same key lands on the same
// shard in every process ([ShardFor] computes it). The key funcs must return
// the same key for equal items for the dispatcher's lifetime; the guarantees
// below rest on it. Each shard has one worker goroutine, a high lane and a
// low lane, each a FIFO queue.
//
// Each item (items are comparable) has at most one entry in its lane, and is
// queued, being handled, or waiting for a retry. [Dispatcher.AddHigh] and
// [Dispatcher.AddLow] do:
//
//	add while the item is…   effect
//	absent                   queued at the back of its lane
//	queued                   nothing (handled once)
//	being handled            marked: when the handling ends, success or failure,
//	                         it is queued once more at the back, attempts reset
//	waiting for a retry      the retry is cancelled; queued now at the back,
//	                         attempts reset
//
// Whenever a worker picks its next item and a high item is queued for its
// shard, it takes the high item (strict priority). With Config.MaxHighBurst
// N > 0, after N high items in a row taken while low items waited, it takes
// one low item. Within a lane, a shard's items are handled in the order they
// were queued. Items waiting for a retry hold back neither lane.
//
// A handler that returns an error or panics (the panic is recovered and
// logged with its stack) has failed; the item is queued again at the back of
// its lane after a backoff (see [RetryPolicy]). After the last attempt it is
// dropped: logged, counted in the drops metric and passed to Config.OnDrop.
// Nothing is dropped silently.
//
// [Dispatcher.Len] counts queued items: not those being handled nor those
// waiting for a retry.
//
// Items added before [Dispatcher.Run] are kept and handled once it starts.
// When Run's context is done, running handlers see it through their ctx, Run
// waits for them, then drops and reports the items still queued or waiting
// for a retry ([ErrStopped]); an item whose handler failed once Run's
// context was done is dropped so too, not counted as a failed attempt nor
// retried. Items added after the dispatcher stopped are
// dropped the same way at once, on the caller's goroutine; so an OnDrop hook
// that re-adds dropped items must skip ErrStopped, or it recurses without
// end.
//
// # Time
//
// Time is read from Config.Clock (a [k8s.io/utils/clock.Clock]), never from
// package time: retry backoffs and handler latencies. A retry is queued no
// earlier than the failed attempt's return plus its backoff, as read from
// that clock, and takes its place (priority, FIFO) as if it had been queued
// exactly when due. One timer serves every retry of a dispatcher.
//
// # Concurrency
//
// All methods are safe for concurrent use. Each shard has its own mutex, held
// only for O(1) work (amortised: queues grow and shrink by doubling and
// halving), never while calling a handler, key func, hook or metric, so
// handlers and hooks may call AddHigh and AddLow. A slow or stuck shard only
// delays its own items: adds to it still return at once and the other shards
// keep working. An item is never handled concurrently with itself, nor with
// any item of the same shard key. Run runs Shards worker goroutines and one
// retry goroutine; a retry costs O(log r) for r pending retries. While no
// retry waits, a pick or an add checks for due retries with one atomic load;
// while some wait, with a clock read too; queueing due retries takes one
// mutex shared by all shards.
//
// # Testing with a fake clock
//
// Pass a [k8s.io/utils/clock/testing.FakeClock] as Config.Clock and run the
// test inside testing/synctest's synctest.Test: add items, call
// synctest.Wait to let the workers settle, and move time with Step to make
// retries come due. Handlers that block on a channel let a test build up
// queues behind them. Cancel Run's context in t.Cleanup and wait for Run to
// return; synctest then also checks that no goroutine leaked.
package sharding
