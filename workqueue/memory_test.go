package workqueue_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/workqueue"
)

// Memory comes back as items go: after mass cancels and after a drain, the
// slab, the index, the heap and the lanes shrink to the size of what is
// left, and what is left is intact.

// smallFootprint checks that f is what a queue holding live items may hold
// at most once everything has shrunk.
func smallFootprint(t *testing.T, f workqueue.Footprint, live int) {
	t.Helper()
	assert.LessOrEqual(t, f.Slots, max(256, 4*live), "slab slots: %+v", f)
	assert.LessOrEqual(t, f.Index, max(16, 16*f.Slots/3), "index positions: %+v", f)
	assert.LessOrEqual(t, f.Heap, max(256, 4*live), "heap capacity: %+v", f)
	assert.LessOrEqual(t, f.Lanes, max(3*1024, 4*live), "lanes capacity: %+v", f)
}

func TestMemoryComesBackAfterCancel(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, keep = 100_000, 100
				q, clk := newQueue(t, c.new)
				// Waiting and ready items, in three priorities, and some processed.
				for i := range n {
					k := fmt.Sprint("k", i)
					switch i % 4 {
					case 0:
						q.AddAfter(k, time.Hour+time.Duration(i%997)*time.Second)
					case 1:
						q.Schedule(k, t0.Add(time.Minute))
					default:
						q.AddWithOpts(workqueue.AddOpts{Priority: prio(i % 3)}, k)
					}
				}
				processed := []string{get(t, q), get(t, q)}
				for _, k := range processed {
					q.Add(k) // held until Done
				}
				rng := rand.New(rand.NewPCG(1, 2))
				for _, i := range rng.Perm(n) {
					if k := fmt.Sprint("k", i); i%(n/keep) != 0 && !isIn(k, processed) {
						require.True(t, q.Cancel(k), k)
					}
				}
				require.NoError(t, workqueue.CheckInvariants(q))
				smallFootprint(t, workqueue.FootprintOf(q), keep+len(processed))
				for _, k := range processed {
					q.Done(k)
				}
				clk.Step(3 * time.Hour)
				synctest.Wait()
				var got []string
				for q.Len() > 0 {
					item := get(t, q)
					got = append(got, item)
					q.Done(item)
				}
				assert.Len(t, got, keep+len(processed), "everything left is handed out, once")
				require.NoError(t, workqueue.CheckInvariants(q))
				smallFootprint(t, workqueue.FootprintOf(q), 0)
			})
		})
	}
}

func isIn(k string, ks []string) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
