package sharding_test

import (
	"context"
	"fmt"
	"log"

	"github.com/taintkit/taintkit/sharding"
)

// The README's quick start: README.md quotes this body verbatim, and the root
// package's TestReadmeCodeIsTested fails if the two drift apart.
func Example_quickStart() {
	// A pod update carries the node it was seen on: a key func must give the
	// same key for equal items for the dispatcher's lifetime.
	type podUpdate struct{ Namespace, Name, NodeName string }

	handled := make(chan string, 2)
	d, err := sharding.New(sharding.Config[string, podUpdate]{
		Shards:  8,
		HighKey: func(node string) string { return node },
		LowKey:  func(pod podUpdate) string { return pod.NodeName }, // a pod shares its node's shard
		HandleHigh: func(ctx context.Context, node string) error {
			handled <- "node " + node
			return nil
		},
		HandleLow: func(ctx context.Context, pod podUpdate) error {
			handled <- "pod " + pod.Namespace + "/" + pod.Name
			return nil // an error is retried with backoff
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	// Adds never block. Queued before Run here, so that the order shows: the
	// node update goes first although it was added last.
	d.AddLow(podUpdate{Namespace: "default", Name: "web-1", NodeName: "node-a"})
	d.AddHigh("node-a")

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { d.Run(ctx); close(stopped) }()
	fmt.Println(<-handled)
	fmt.Println(<-handled)
	cancel()
	<-stopped // Run returns once every handler has returned
	// Output:
	// node node-a
	// pod default/web-1
}
