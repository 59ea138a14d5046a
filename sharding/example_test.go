package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/sharding"
)

// podKey routes a pod "node/pod" by its node's name, so a node and its pods
// share a shard.
func podKey(pod string) string {
	node, _, _ := strings.Cut(pod, "/")
	return node
}

// ExampleDispatcher shows strict priority on one shard: while the worker is
// busy with a pod, two pods and two node updates queue behind it; the nodes go
// first, then the pods, each lane in order.
func ExampleDispatcher() {
	handled := make(chan string, 10)
	busy, release := make(chan struct{}), make(chan struct{})
	d, err := sharding.New(sharding.Config[string, string]{
		Shards:  1,
		HighKey: func(node string) string { return node },
		LowKey:  podKey,
		HandleHigh: func(_ context.Context, node string) error {
			handled <- "node " + node
			return nil
		},
		HandleLow: func(_ context.Context, pod string) error {
			if pod == "node-a/first" {
				close(busy)
				<-release // hold the worker while items queue up
			}
			handled <- "pod " + pod
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { d.Run(ctx); close(stopped) }()

	d.AddLow("node-a/first")
	<-busy
	d.AddLow("node-a/web")
	d.AddHigh("node-a")
	d.AddLow("node-b/db")
	d.AddHigh("node-b")
	fmt.Println("queued:", d.Len())
	close(release)
	for range 5 {
		fmt.Println(<-handled)
	}
	cancel()
	<-stopped
	// Output:
	// queued: 4
	// pod node-a/first
	// node node-a
	// node node-b
	// pod node-a/web
	// pod node-b/db
}

// ExampleNew shows a configuration error.
func ExampleNew() {
	_, err := sharding.New(sharding.Config[string, string]{
		Shards:    -1,
		HighKey:   func(node string) string { return node },
		LowKey:    podKey,
		HandleLow: func(context.Context, string) error { return nil },
	})
	fmt.Println(err)
	_, err = sharding.New(sharding.Config[string, string]{
		Shards:     -1,
		HighKey:    func(node string) string { return node },
		LowKey:     podKey,
		HandleHigh: func(context.Context, string) error { return nil },
		HandleLow:  func(context.Context, string) error { return nil },
	})
	fmt.Println(err)
	// Output:
	// sharding: HandleHigh must not be nil
	// sharding: Shards must not be negative, got -1
}

// ExampleRetryPolicy shows a failing handler retried on a fake clock, with
// backoffs of 1s then 2s, then dropped after its third attempt.
func ExampleRetryPolicy() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	attempts := make(chan time.Duration, 10)
	dropped := make(chan sharding.Drop[string, string], 1)
	retried := make(retryCounter, 10)
	d, _ := sharding.New(sharding.Config[string, string]{
		HighKey:    func(node string) string { return node },
		LowKey:     podKey,
		HandleHigh: func(context.Context, string) error { return nil },
		HandleLow: func(context.Context, string) error {
			attempts <- clk.Since(t0)
			return errors.New("API server unavailable")
		},
		Clock:   clk,
		Retry:   sharding.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second},
		Metrics: retryMetrics{retried},
		OnDrop:  func(d sharding.Drop[string, string]) { dropped <- d },
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { d.Run(ctx); close(stopped) }()

	d.AddLow("node-a/web")
	fmt.Printf("attempt at +%v\n", <-attempts)
	for _, wait := range []time.Duration{time.Second, 2 * time.Second} {
		<-retried // the failure is recorded: its retry is due wait from now
		clk.Step(wait)
		fmt.Printf("attempt at +%v\n", <-attempts)
	}
	drop := <-dropped
	fmt.Println("dropped", drop.Low, "after", drop.Attempts, "attempts:", drop.Err)
	cancel()
	<-stopped
	// Output:
	// attempt at +0s
	// attempt at +1s
	// attempt at +3s
	// dropped node-a/web after 3 attempts: sharding: low item dropped after 3 failed attempts: API server unavailable
}

// retryCounter is a retries metric that reports each retry on a channel.
type retryCounter chan struct{}

func (c retryCounter) Inc() { c <- struct{}{} }

// retryMetrics provides only the retries metric; nil means "not wanted".
type retryMetrics struct{ retries retryCounter }

func (retryMetrics) NewDepthMetric(string, sharding.Lane) sharding.Gauge        { return nil }
func (retryMetrics) NewDurationMetric(string, sharding.Lane) sharding.Histogram { return nil }
func (m retryMetrics) NewRetriesMetric(string, sharding.Lane) sharding.Counter  { return m.retries }
func (retryMetrics) NewDropsMetric(string, sharding.Lane) sharding.Counter      { return nil }
