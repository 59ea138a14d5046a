package workqueue_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

// The queue semantics both interfaces document: FIFO, duplicates collapse,
// never two workers for one item, an item added while it is processed is
// handed out again after Done.

func TestFIFO(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		for i := range 5 {
			q.Add(fmt.Sprint("k", i))
		}
		assert.Equal(t, 5, q.Len())
		assert.Equal(t, []string{"k0", "k1", "k2", "k3", "k4"}, drain(t, q))
	})
}

func TestDuplicatesCollapse(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.Add("a")
		q.Add("b")
		q.Add("a")
		assert.Equal(t, 2, q.Len())
		assert.Equal(t, []string{"a", "b"}, drain(t, q), "a keeps its first place")
	})
}

func TestAddWhileProcessingIsHandedOutAfterDone(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.Add("a")
		require.Equal(t, "a", get(t, q))
		q.Add("a")
		q.Add("a") // collapses with the one above
		got := getAsync(q)
		synctest.Wait()
		assert.True(t, pending(got), "handed out while being processed")
		q.Done("a")
		synctest.Wait()
		assert.Equal(t, "a", <-got)
		q.Done("a")
		assert.Zero(t, q.Len())
	})
}

func TestDoneWithoutAddEndsTheItem(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.Add("a")
		get(t, q)
		q.Done("a")
		q.Done("a") // not handed out: nothing
		q.Done("never-added")
		assert.Zero(t, q.Len())
		_, ok := q.Due("a")
		assert.False(t, ok)
	})
}

// Until Done, items added while processed wait in the order they were
// added, as controller-runtime's queue hands them out: an item that was
// added before another, while it was processed, comes first after its Done.
func TestAddedWhileProcessingKeepsItsTurn(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		q.Add("foo")
		require.Equal(t, "foo", get(t, q))
		q.Add("foo")
		q.Add("bar")
		require.Equal(t, "bar", get(t, q))
		q.Add("baz")
		q.Done("foo")
		assert.Equal(t, "foo", get(t, q))
		assert.Equal(t, "baz", get(t, q))
	})
}

func TestGetWaitsForAnItem(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		got := getAsync(q)
		synctest.Wait()
		assert.True(t, pending(got))
		q.Add("a")
		synctest.Wait()
		assert.Equal(t, "a", <-got)
	})
}

// Many workers, many producers: no item is ever held by two workers, and
// every add is followed by a hand-out that began after it.
func TestNeverTwoWorkersForOneItem(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			q, _ := newQueue(t, c.new)
			var mu sync.Mutex
			held := map[string]bool{}
			var workers sync.WaitGroup
			for range 8 {
				workers.Go(func() {
					for {
						item, shutdown := q.Get()
						if shutdown {
							return
						}
						mu.Lock()
						if held[item] {
							t.Errorf("%s handed out twice at once", item)
						}
						held[item] = true
						mu.Unlock()
						mu.Lock()
						held[item] = false
						mu.Unlock()
						q.Done(item)
					}
				})
			}
			var producers sync.WaitGroup
			for p := range 4 {
				producers.Go(func() {
					for i := range 2000 {
						q.Add(fmt.Sprint("k", (i*7+p)%50))
					}
				})
			}
			producers.Wait()
			q.ShutDownWithDrain()
			workers.Wait()
			if c.name == "client-go" {
				assert.Zero(t, q.Len(), "drained: every item added was handed out")
			}
		})
	}
}
