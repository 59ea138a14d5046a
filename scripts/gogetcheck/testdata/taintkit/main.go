// A first program over the three packages of github.com/taintkit/taintkit,
// as a user who has just run "go get github.com/taintkit/taintkit" writes
// it: gogetcheck builds and runs it in a fresh module.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/sharding"
	"github.com/taintkit/taintkit/timedqueue"
	"github.com/taintkit/taintkit/tolerations"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}

func run() error {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	// tolerations: a pod that tolerates an unreachable node for 300 s.
	taints := []v1.Taint{{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}}
	d := tolerations.Decide(taints, tolerations.WithDefaultTolerations(nil), time.Time{}, t0)
	fmt.Println("tolerations:", d)
	if d.Action != tolerations.EvictAt || !d.At.Equal(t0.Add(300*time.Second)) {
		return fmt.Errorf("tolerations: want eviction at +300s, got %v", d)
	}

	// timedqueue: the eviction fires at its time on a fake clock, not before.
	clk := testingclock.NewFakeClock(t0)
	fired := make(chan string, 1)
	q, err := timedqueue.New(func(ctx context.Context, pod string) error {
		fired <- pod
		return nil
	}, timedqueue.WithClock(clk))
	if err != nil {
		return err
	}
	q.AddWork("default/web-1", t0, d.At)
	clk.Step(299 * time.Second)
	select {
	case pod := <-fired:
		return fmt.Errorf("timedqueue: %s fired early", pod)
	default:
	}
	clk.Step(time.Second)
	fmt.Println("timedqueue: fired", <-fired)
	if err := q.Shutdown(context.Background()); err != nil {
		return err
	}

	// sharding: a node update is handled, then the pod update.
	ctx, cancel := context.WithCancel(context.Background())
	handled := make(chan string, 2)
	disp, err := sharding.New(sharding.Config[string, string]{
		Shards:     2,
		HighKey:    func(node string) string { return node },
		LowKey:     func(pod string) string { return pod },
		HandleHigh: func(ctx context.Context, node string) error { handled <- "node " + node; return nil },
		HandleLow:  func(ctx context.Context, pod string) error { handled <- "pod " + pod; return nil },
	})
	if err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() { disp.Run(ctx); close(done) }()
	disp.AddHigh("node-1")
	disp.AddLow("default/web-1")
	fmt.Println("sharding:", <-handled, "and", <-handled)
	cancel()
	<-done
	return nil
}
