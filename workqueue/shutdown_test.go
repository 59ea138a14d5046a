package workqueue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/workqueue"
)

// Where client-go's and controller-runtime's queues differ, each
// constructor keeps the behaviour of the queue it stands in for.

func TestShutDownClientGoHandsOutWhatIsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, clk := newQueue(t, constructors[0].new)
		q.Add("a")
		q.Add("b")
		q.AddAfter("later", time.Second)
		q.ShutDown()
		require.NoError(t, workqueue.CheckInvariants(q))
		assert.True(t, q.ShuttingDown())
		q.Add("c") // ignored
		q.AddAfter("d", 0)
		q.Schedule("e", t0)
		clk.Step(time.Hour)
		assert.Equal(t, 2, q.Len())
		assert.Equal(t, "a", get(t, q))
		assert.Equal(t, "b", get(t, q))
		_, shutdown := q.Get()
		assert.True(t, shutdown, "then shutdown: the waiting item was dropped")
		q.ShutDown() // allowed again
		q.Done("a")
		q.Done("b")
	})
}

func TestShutDownControllerRuntimeStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, _ := newQueue(t, constructors[1].new)
		q.Add("a")
		q.Add("b")
		get(t, q)
		q.Add("a") // held
		q.AddAfter("c", time.Second)
		q.ShutDown()
		require.NoError(t, workqueue.CheckInvariants(q))
		assert.True(t, q.ShuttingDown())
		for range 2 {
			item, p, shutdown := q.GetWithPriority()
			assert.True(t, shutdown)
			assert.Zero(t, item)
			assert.Zero(t, p)
		}
		assert.Zero(t, q.Len())
		assert.PanicsWithValue(t, "workqueue: ShutDown of a queue already shut down (a queue of NewPriority panics, as controller-runtime's priority queue does)",
			q.ShutDown, "as controller-runtime's")
		assert.Panics(t, q.ShutDownWithDrain)
	})
}

func TestShutDownReleasesWaitingGets(t *testing.T) {
	eachQueue(t, func(t *testing.T, q *workqueue.Queue[string], _ *testingclock.FakeClock) {
		a, b := getAsync(q), getAsync(q)
		synctest.Wait()
		q.ShutDown()
		synctest.Wait()
		assert.Equal(t, "<shutdown>", <-a)
		assert.Equal(t, "<shutdown>", <-b)
	})
}

func TestShutDownWithDrainWaitsForDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, _ := newQueue(t, constructors[0].new)
		q.Add("a")
		q.Add("b")
		require.Equal(t, "a", get(t, q))
		q.Add("a") // handed out again during the drain
		returned := make(chan struct{})
		go func() { q.ShutDownWithDrain(); close(returned) }()
		synctest.Wait()
		require.True(t, q.ShuttingDown())
		assert.Equal(t, "b", get(t, q))
		q.Done("b")
		q.Done("a")
		assert.Equal(t, "a", get(t, q))
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("returned with an item processed")
		default:
		}
		q.Done("a")
		synctest.Wait()
		<-returned
		_, shutdown := q.Get()
		assert.True(t, shutdown)
	})
}

func TestShutDownEndsShutDownWithDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, _ := newQueue(t, constructors[0].new)
		q.Add("a")
		get(t, q)
		returned := make(chan struct{})
		go func() { q.ShutDownWithDrain(); close(returned) }()
		synctest.Wait()
		q.ShutDown()
		synctest.Wait()
		<-returned
	})
}

func TestShutDownWithDrainControllerRuntimeIsShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, _ := newQueue(t, constructors[1].new)
		q.Add("a")
		get(t, q)
		q.ShutDownWithDrain() // does not wait for a's Done
		assert.True(t, q.ShuttingDown())
	})
}

// Len: client-go's counts what Get can hand out now; controller-runtime's
// also counts the ready items that are being processed.
func TestLenOfReadyItemsBeingProcessed(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q, _ := newQueue(t, c.new)
				q.Add("a")
				get(t, q)
				q.Add("a")
				want := map[string]int{"client-go": 0, "controller-runtime": 1}[c.name]
				assert.Equal(t, want, q.Len())
				q.Done("a")
				assert.Equal(t, 1, q.Len())
			})
		})
	}
}

// ShutDown ends the queue's goroutine: synctest.Test fails a test whose
// goroutines outlive it, with no Cleanup here to help.
func TestShutDownEndsTheGoroutine(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := c.new(configAt(t0))
				q.AddAfter("a", time.Hour)
				q.ShutDown()
			})
		})
	}
}
