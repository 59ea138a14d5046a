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
)

// checkHeap verifies the 4-ary heap order, that each waiting entry has
// exactly one live node and the others are stale, and the bound on stale nodes.
func checkHeap[K comparable](t *testing.T, s *store[K]) {
	t.Helper()
	require.NoError(t, s.check())
}

func TestHeapRandomOps(t *testing.T) {
	// compact makes the live nodes anew from the slab unless the slab is
	// more than compactScan times larger than the heap; 2000 running entries
	// (in no heap) make it filter the heap's nodes instead.
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
		i := s.alloc()
		e := s.at(i)
		e.key, e.seq, e.state = 1000+k, s.nextSeq(), stateRunning
		s.idx.insert(&s.slab, e.key, i)
	}
	live := map[int]bool{}
	compactions := 0
	add := func(k int) {
		i := s.alloc()
		e := s.at(i)
		e.key, e.seq, e.next = k, s.nextSeq(), int64(rng.IntN(50)) // many ties
		s.idx.insert(&s.slab, k, i)
		s.push(i)
		live[k] = true
	}
	unwait := func(i int32) {
		before := len(s.heap)
		s.unwait(i, false)
		if len(s.heap) < before {
			compactions++
		}
	}
	for op := range 5000 {
		k := rng.IntN(300)
		switch {
		case !live[k]:
			add(k)
		case rng.IntN(3) == 0: // cancel: lazy deletion
			i, _ := s.idx.get(&s.slab, k)
			require.True(t, s.idx.delete(&s.slab, k))
			s.release(i)
			unwait(i)
			delete(live, k)
		case rng.IntN(2) == 0: // reschedule: a new node, the old one stale
			i, _ := s.idx.get(&s.slab, k)
			e := s.at(i)
			e.seq, e.next = s.nextSeq(), int64(rng.IntN(50))
			unwait(i)
			s.push(i)
		default: // pop the head
			n, ok := s.head()
			require.True(t, ok)
			i := s.popHead()
			require.Equal(t, n.idx, i)
			delete(live, s.at(i).key)
			require.True(t, s.idx.delete(&s.slab, s.at(i).key))
			s.release(i)
		}
		if op%97 == 0 {
			checkHeap(t, s)
		}
	}
	checkHeap(t, s)
	assert.Greater(t, compactions, 10, "compaction exercised")
	// Popping everything yields (next, seq) order, each live schedule once.
	type ns struct {
		at  int64
		seq uint64
	}
	var got []ns
	for {
		if _, ok := s.head(); !ok {
			break
		}
		i := s.popHead()
		got = append(got, ns{s.at(i).next, s.at(i).seq})
		s.at(i).state = stateRunning
	}
	assert.True(t, slices.IsSortedFunc(got, func(a, b ns) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(int64(a.seq) - int64(b.seq))
	}), "pop order")
	assert.Len(t, got, len(live))
	assert.Empty(t, s.heap)
	assert.Zero(t, s.waiting)
}

func TestHeapGenWraps(t *testing.T) {
	// Ties are broken by gen with serial-number arithmetic: FIFO across the
	// 2³² wrap of the low bits of seq.
	s := newStore[int]()
	s.seq = 1<<32 - 3
	for k := range 6 {
		i := s.alloc()
		e := s.at(i)
		e.key, e.seq, e.next = k, s.nextSeq(), 7
		s.push(i)
	}
	var order []int
	for {
		if _, ok := s.head(); !ok {
			break
		}
		i := s.popHead()
		order = append(order, s.at(i).key)
		s.at(i).state = stateRunning
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, order)
}

func TestTimePackingRoundTrips(t *testing.T) {
	s := newStore[int]()
	i := s.alloc()
	for _, tm := range []time.Time{
		{},
		time.Date(2025, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2025, 1, 1, 0, 0, 0, 1, time.Local),
		time.Date(1500, 6, 1, 0, 0, 0, 999_999_999, time.FixedZone("A", -7200)),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		s.setTimes(i, tm, tm)
		assert.Equal(t, tm, s.createdAt(i))
		assert.Equal(t, tm, s.fireAt(i))
	}
	s.setTimes(i, t0().Round(0), t0())
	assert.Equal(t, t0(), s.createdAt(i), "no monotonic reading")
}

func t0() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

func TestLocationsPastTheInternTableAreKept(t *testing.T) {
	// Each time.FixedZone is a new *Location: past locOverflow of them, the
	// entries keep their own pointers in xlocs, which release and a
	// reschedule to an interned Location clear.
	s := newStore[int]()
	type slot struct {
		i              int32
		created, fired time.Time
	}
	var slots []slot
	for k := range 600 {
		i := s.alloc()
		created := time.Date(2025, 1, 1, 0, 0, k, 0, time.FixedZone(fmt.Sprint("C", k), k))
		fired := time.Date(2025, 1, 1, 0, 0, k, 0, time.FixedZone(fmt.Sprint("F", k), -k))
		if k%3 == 0 {
			fired = fired.UTC()
		}
		s.setTimes(i, created, fired)
		slots = append(slots, slot{i, created, fired})
	}
	assert.Len(t, s.locs, locOverflow)
	for _, sl := range slots {
		assert.Same(t, sl.created.Location(), s.createdAt(sl.i).Location())
		assert.Same(t, sl.fired.Location(), s.fireAt(sl.i).Location())
		assert.Same(t, sl.fired.Location(), s.fireLocation(sl.i))
		assert.True(t, sl.fired.Equal(s.fireAt(sl.i)))
	}
	overflowed := len(s.xlocs)
	assert.Greater(t, overflowed, 400)
	s.setTimes(slots[599].i, t0(), t0())
	assert.Len(t, s.xlocs, overflowed-1, "reschedule to interned Locations")
	for _, sl := range slots {
		s.release(sl.i)
	}
	assert.Empty(t, s.xlocs, "release")
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

func TestEntryIsSmall(t *testing.T) {
	// The per-item memory budget depends on it: keep an eye on new fields.
	assert.LessOrEqual(t, unsafe.Sizeof(entry[string]{}), uintptr(56))
	assert.Equal(t, uintptr(16), unsafe.Sizeof(hnode{}))
}

// BenchmarkCompact measures one compaction of a heap of 4/3·n nodes, n of
// them live (100k waiting entries, string keys), per node. Under
// rescheduling churn a compaction comes every n/3 reschedules, so ns/node ×4
// is its cost per reschedule (see BenchmarkReschedule). method=probe is how
// compact did it: each node checked against its slab entry, in heap order,
// so at random, a cache miss each (13.4 ns/node here). method=scan is how it
// does it now: the live nodes made anew from the waiting entries, the slab
// read in slot order (8.5 ns/node).
//
//	go test -run '^$' -bench Compact -count 10 ./timedqueue/
func BenchmarkCompact(b *testing.B) {
	const n = 100_000
	s := newStore[string]()
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range n {
		i := s.alloc()
		e := s.at(i)
		e.key, e.seq, e.next = fmt.Sprint("namespace/pod-", k), s.nextSeq(), rng.Int64N(int64(time.Hour))
		s.idx.insert(&s.slab, e.key, i)
		s.push(i)
	}
	// Reschedule n/3 entries at random, without the compaction that would
	// follow: each old node stays in the heap, stale.
	for range n / 3 {
		i := int32(rng.IntN(n))
		e := s.at(i)
		e.seq, e.next = s.nextSeq(), rng.Int64N(int64(time.Hour))
		s.waiting--
		s.push(i)
	}
	saved := slices.Clone(s.heap)
	for _, m := range []struct {
		name string
		live func() []hnode
	}{
		{"probe", s.dropStale},
		{"scan", func() []hnode { return s.appendWaiting(s.heap[:0], -1) }},
	} {
		b.Run("method="+m.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s.heap = append(s.heap[:0], saved...)
				b.StartTimer()
				s.heap = m.live()
				s.heapify()
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N*len(saved)), "ns/node")
			require.NoError(b, s.check())
		})
	}
}
