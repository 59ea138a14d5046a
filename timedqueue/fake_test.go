package timedqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/timedqueue"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// errPanic, as a scripted result, makes the fake work func panic.
var errPanic = errors.New("panic please")

// run is one start of the fake work func: key and clock offset from t0.
type run struct {
	key string
	at  time.Duration
}

func (r run) String() string { return fmt.Sprintf("%s@%v", r.key, r.at) }

// fake is a scriptable work func that records its runs and checks that no key
// runs concurrently with itself.
type fake struct {
	clk *testingclock.FakeClock

	mu          sync.Mutex
	runs        []run
	errs        map[string][]error       // results per key, one per attempt; nil after
	gates       map[string]chan struct{} // if set, each attempt waits for a value or close
	ctxErrs     map[string]error         // ctx.Err() seen after the gate, per key
	inFlight    map[string]bool
	concurrent  int
	peak        int
	overlapping []string
}

func newFake(clk *testingclock.FakeClock) *fake {
	return &fake{clk: clk, errs: map[string][]error{}, gates: map[string]chan struct{}{},
		ctxErrs: map[string]error{}, inFlight: map[string]bool{}}
}

func (f *fake) work(ctx context.Context, key string) error {
	f.mu.Lock()
	f.runs = append(f.runs, run{key, f.clk.Since(t0)})
	if f.inFlight[key] {
		f.overlapping = append(f.overlapping, key)
	}
	f.inFlight[key] = true
	f.concurrent++
	f.peak = max(f.peak, f.concurrent)
	var err error
	if l := f.errs[key]; len(l) > 0 {
		err, f.errs[key] = l[0], l[1:]
	}
	gate := f.gates[key]
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	f.ctxErrs[key] = ctx.Err()
	f.inFlight[key] = false
	f.concurrent--
	f.mu.Unlock()
	if err == errPanic {
		panic("boom " + key)
	}
	return err
}

func (f *fake) setGate(key string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.gates[key] = ch
	return ch
}

func (f *fake) script(key string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[key] = errs
}

func (f *fake) takeRuns() []run {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs
	f.runs = nil
	return r
}

func (f *fake) noOverlap(t *testing.T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.overlapping, "keys that ran concurrently with themselves")
}

// failures records the failure hook's calls.
type failures struct {
	mu    sync.Mutex
	calls []failure
}

type failure struct {
	w   timedqueue.TimedWorker[string]
	err error
}

func (f *failures) hook(w timedqueue.TimedWorker[string], err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, failure{w, err})
}

func (f *failures) get() []failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]failure(nil), f.calls...)
}

// setup makes a FakeClock at t0, a fake work func and a queue that shuts down
// (and so checks for leaked goroutines) at the end of the test. It must run
// inside a synctest bubble.
func setup(t *testing.T, opts ...timedqueue.Option) (*testingclock.FakeClock, *fake, *timedqueue.TimedWorkerQueue[string], *failures) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	f := newFake(clk)
	fl := &failures{}
	opts = append([]timedqueue.Option{
		timedqueue.WithClock(clk),
		timedqueue.WithLogger(logr.Discard()),
		timedqueue.WithFailureHook(fl.hook),
		timedqueue.WithRetry(timedqueue.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}),
	}, opts...)
	q, err := timedqueue.New(f.work, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		f.mu.Lock()
		for k, g := range f.gates { // let blocked work return
			closeOnce(g)
			delete(f.gates, k)
		}
		f.mu.Unlock()
		require.NoError(t, q.Shutdown(context.Background()))
		f.noOverlap(t)
	})
	return clk, f, q, fl
}

// closeOnce closes ch unless a test closed it already.
func closeOnce(ch chan struct{}) {
	defer func() { _ = recover() }()
	close(ch)
}

// step moves the clock and lets the queue settle.
func step(clk *testingclock.FakeClock, d time.Duration) {
	clk.Step(d)
	synctest.Wait()
}
