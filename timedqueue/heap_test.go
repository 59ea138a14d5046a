package timedqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taintkit/taintkit/internal/sched"
)

// at returns the moment n seconds after a fixed time.
func at(n int) moment { return momentOf(t0().Add(time.Duration(n) * time.Second)) }

func TestHeapRandomOps(t *testing.T) {
	// The compaction makes the live nodes anew from the slab unless the slab
	// is more than 4 times larger than the heap; 2000 running entries (in no
	// heap) make it filter the heap's nodes instead.
	for _, running := range []int{0, 2000} {
		for _, seed := range []uint64{1, 2, 3, 42} {
			t.Run(fmt.Sprintf("running=%d/seed=%d", running, seed), func(t *testing.T) {
				heapRandomOps(t, seed, running)
			})
		}
	}
}

func heapRandomOps(t *testing.T, seed uint64, running int) {
	rng := rand.New(rand.NewPCG(seed, seed))
	s := newStore[int]()
	for k := range running {
		s.at(insertKey(&s, 1000+k)).state = stateRunning
	}
	live := map[int]bool{}
	compactions := 0
	unwait := func(i int32) {
		before := len(s.heap)
		s.unwait(i)
		if len(s.heap) < before {
			compactions++
		}
	}
	for op := range 5000 {
		k := rng.IntN(300)
		switch {
		case !live[k]:
			i := insertKey(&s, k)
			s.at(i).next = at(rng.IntN(50)) // many ties
			s.push(i)
			live[k] = true
		case rng.IntN(3) == 0: // cancel: lazy deletion
			i, _ := get(&s, k)
			require.True(t, deleteKey(&s, k))
			unwait(i)
			delete(live, k)
		case rng.IntN(2) == 0: // reschedule: a new node, the old one stale
			i, _ := get(&s, k)
			e := s.at(i)
			s.setTimes(e, time.Time{}, time.Time{})
			e.next = at(rng.IntN(50))
			unwait(i)
			s.push(i)
		default: // pop the head
			n, ok := s.head()
			require.True(t, ok)
			i := s.pop()
			require.Equal(t, n.slot, i)
			delete(live, s.at(i).key)
			require.True(t, deleteKey(&s, s.at(i).key))
		}
		if op%97 == 0 {
			require.NoError(t, s.check())
		}
	}
	require.NoError(t, s.check())
	assert.Greater(t, compactions, 10, "compaction exercised")
	// Popping everything yields (next, gen) order, each live schedule once.
	var got []sched.Node
	for {
		if _, ok := s.head(); !ok {
			break
		}
		i := s.pop()
		got = append(got, sched.Node{At: sched.Moment(s.at(i).next), Gen: s.at(i).gen})
		s.at(i).state = stateRunning
	}
	assert.True(t, slices.IsSortedFunc(got, func(a, b sched.Node) int {
		if sched.Less(a, b) {
			return -1
		}
		return 1
	}), "pop order")
	assert.Len(t, got, len(live))
	assert.Empty(t, s.heap)
	assert.Zero(t, s.waiting)
}

func TestHeapGenWraps(t *testing.T) {
	// Ties are broken by gen with serial-number arithmetic: FIFO across the
	// 2³² wrap.
	s := newStore[int]()
	s.gen = 1<<32 - 3
	for k := range 6 {
		i := insertKey(&s, k)
		s.at(i).next = at(7)
		s.push(i)
	}
	var order []int
	for {
		if _, ok := s.head(); !ok {
			break
		}
		i := s.pop()
		order = append(order, s.at(i).key)
		s.at(i).state = stateRunning
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, order)
}

func t0() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

func TestTimesRoundTrip(t *testing.T) {
	s := newStore[int]()
	e := s.at(insertKey(&s, 1))
	for _, tm := range []time.Time{
		{},
		time.Date(2025, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2025, 1, 1, 0, 0, 0, 1, time.Local),
		time.Date(1500, 6, 1, 0, 0, 0, 999_999_999, time.FixedZone("A", -7200)),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		s.setTimes(e, tm, tm)
		assert.Equal(t, tm, s.snapshot(e).CreatedAt)
		assert.Equal(t, tm, s.snapshot(e).FireAt)
	}
	s.setTimes(e, t0().Round(0), t0())
	assert.Equal(t, t0(), s.snapshot(e).CreatedAt, "no monotonic reading")
}

func TestLocationsPastTheTableAreKept(t *testing.T) {
	// Each time.FixedZone is a new *Location: past 255 of them, the entries'
	// Locations are kept by key, until released or rescheduled to Locations
	// in the table.
	s := newStore[int]()
	type sched struct {
		key            int
		created, fired time.Time
	}
	var all []sched
	for k := range 600 {
		created := time.Date(2025, 1, 1, 0, 0, k, 0, time.FixedZone(fmt.Sprint("C", k), k))
		fired := time.Date(2025, 1, 1, 0, 0, k, 0, time.FixedZone(fmt.Sprint("F", k), -k))
		if k%3 == 0 {
			fired = fired.UTC()
		}
		s.setTimes(s.at(insertKey(&s, k)), created, fired)
		all = append(all, sched{k, created, fired})
	}
	assert.Len(t, s.locs, spilled)
	for _, sc := range all {
		i, _ := get(&s, sc.key)
		w := s.snapshot(s.at(i))
		assert.Same(t, sc.created.Location(), w.CreatedAt.Location())
		assert.Same(t, sc.fired.Location(), w.FireAt.Location())
		assert.True(t, sc.fired.Equal(w.FireAt))
	}
	n := len(s.spill)
	assert.Greater(t, n, 400)
	i, _ := get(&s, 599)
	s.setTimes(s.at(i), t0(), t0())
	assert.Len(t, s.spill, n-1, "rescheduled to Locations in the table")
	for _, sc := range all {
		deleteKey(&s, sc.key)
	}
	assert.Nil(t, s.spill, "released")
}

func TestBackoff(t *testing.T) {
	p, err := RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}.normalize()
	require.NoError(t, err)
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, p.backoff(n))
	}
	assert.Equal(t, []time.Duration{1e9, 2e9, 4e9, 8e9, 10e9, 10e9}, got)
	p, err = RetryPolicy{}.normalize()
	require.NoError(t, err)
	assert.Equal(t, RetryPolicy{MaxAttempts: DefaultMaxAttempts, InitialBackoff: DefaultInitialBackoff, MaxBackoff: DefaultMaxBackoff}, p)
	assert.Equal(t, DefaultMaxBackoff, p.backoff(1000))
	p, err = RetryPolicy{InitialBackoff: time.Hour}.normalize()
	require.NoError(t, err)
	assert.Equal(t, time.Hour, p.MaxBackoff, "MaxBackoff defaults to at least InitialBackoff")
	p, err = RetryPolicy{MaxBackoff: 100 * time.Millisecond}.normalize()
	require.NoError(t, err, "a MaxBackoff alone below the default InitialBackoff is valid, as in sharding")
	assert.Equal(t, 100*time.Millisecond, p.InitialBackoff, "InitialBackoff defaults to at most MaxBackoff")
	p = RetryPolicy{MaxAttempts: 1, InitialBackoff: 1, MaxBackoff: 1 << 62}
	assert.Equal(t, time.Duration(1<<62), p.backoff(200), "no overflow")
}

func TestEntryAndNodeAreSmall(t *testing.T) {
	// The per-item memory budget depends on them: keep an eye on new fields.
	assert.LessOrEqual(t, unsafe.Sizeof(entry[string]{}), uintptr(64))
	assert.Equal(t, uintptr(20), unsafe.Sizeof(sched.Node{}))
}
