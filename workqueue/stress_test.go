package workqueue_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

// Producers add, schedule and cancel overlapping keys while workers get and
// finish them and the clock moves: no item is ever held by two workers, the
// queue ends consistent, and every key whose last call queued it was handed
// out after that call. Run with -race.
func TestStress(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { stress(t, c.new) })
		})
	}
}

func stress(t *testing.T, newQ func(workqueue.Config[string]) *workqueue.Queue[string]) {
	clk := testingclock.NewFakeClock(t0)
	q := newQ(workqueue.Config[string]{Clock: clk})
	const nkeys, producers, workers, ops = 40, 4, 6, 3000
	var (
		tick       atomic.Int64 // orders events: the later, the larger
		mu         sync.Mutex
		held       = map[string]bool{}
		handedOut  = map[string]int64{} // tick of the last Get of each key
		lastQueued = map[string]int64{} // tick before the last call that queued it, 0 if cancelled since
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				at := tick.Add(1)
				mu.Lock()
				if held[item] {
					t.Errorf("%s held by two workers", item)
				}
				held[item], handedOut[item] = true, at
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				held[item] = false
				mu.Unlock()
				q.Done(item)
			}
		})
	}
	var prod sync.WaitGroup
	for p := range producers {
		prod.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			for range ops {
				// Each producer owns its keys: its calls on one are in order.
				k := fmt.Sprintf("p%d-k%d", p, rng.IntN(nkeys/producers))
				d := time.Duration(rng.IntN(50)) * time.Millisecond
				at := tick.Add(1)
				queued := true
				switch rng.IntN(6) {
				case 0:
					q.Add(k)
				case 1:
					q.AddAfter(k, d)
				case 2:
					q.Schedule(k, clk.Now().Add(d))
				case 3:
					q.AddWithOpts(workqueue.AddOpts{After: d, Priority: prio(rng.IntN(3))}, k)
				case 4:
					q.AddRateLimited(k)
					q.Forget(k)
				default:
					queued = false
					q.Cancel(k)
				}
				mu.Lock()
				if queued {
					lastQueued[k] = at
				} else {
					lastQueued[k] = 0
				}
				mu.Unlock()
			}
		})
	}
	stepping := make(chan struct{})
	go func() {
		defer close(stepping)
		for range 2000 {
			clk.Step(5 * time.Millisecond)
			runtime.Gosched()
		}
	}()
	prod.Wait()
	<-stepping
	clk.Step(time.Hour) // past every time
	synctest.Wait()     // the workers have handed out what is ready
	require.NoError(t, workqueue.CheckInvariants(q))
	require.Zero(t, q.Len())
	q.ShutDown()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k, at := range lastQueued {
		if at > 0 {
			assert.Greater(t, handedOut[k], at, "%s queued, never handed out after", k)
		}
	}
}
