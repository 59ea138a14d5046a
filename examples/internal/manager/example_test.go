package manager_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/cluster"
	"github.com/taintkit/taintkit/examples/internal/manager"
)

// A manager wired to an in-memory cluster: the listers are the cluster's
// lookups, the cluster is the PodClient, and its change handlers play the
// informer's. WaitIdle settles the manager after each change or clock step.
func Example() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	c := cluster.New(clk)
	m, err := manager.New(manager.Config{
		GetNode:    c.GetNode,
		GetPod:     c.GetPod,
		PodsOnNode: c.PodsOnNode,
		Client:     c,
		Clock:      clk,
		Logger:     ptr.To(logr.Discard()), // quiet
		TrackIdle:  true,
	})
	if err != nil {
		panic(err)
	}
	c.OnNode(m.NodeUpdated)
	c.OnPod(m.PodUpdated)
	c.OnPod(func(old, new *v1.Pod) {
		if new == nil {
			fmt.Printf("+%v: %s evicted\n", clk.Since(start), old.Name)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	settle := func() {
		if err := m.WaitIdle(ctx); err != nil {
			panic(err)
		}
	}

	_ = c.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	for name, secs := range map[string]*int64{"stays-60s": ptr.To[int64](60), "tolerates-nothing": nil} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: "node-1"}}
		if secs != nil {
			pod.Spec.Tolerations = []v1.Toleration{{
				Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists,
				Effect: v1.TaintEffectNoExecute, TolerationSeconds: secs,
			}}
		}
		_, _ = c.AddPod(pod)
	}
	settle()

	_ = c.SetTaints("node-1", v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute})
	settle()
	clk.Step(time.Minute)
	settle()
	// Output:
	// +0s: tolerates-nothing evicted
	// +1m0s: stays-60s evicted
}
