package app

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// RunWithClients is Run on given clientsets: client for the informers, the
// pod writes and the events, leaderClient for the lease.
func RunWithClients(ctx context.Context, client, leaderClient kubernetes.Interface, o Options) error {
	return run(ctx, clients{api: client, leader: leaderClient, events: client}, o)
}

// RunWithEventsClient is RunWithClients with the events on a clientset of
// their own, as Run has them.
func RunWithEventsClient(ctx context.Context, client, leaderClient, eventsClient kubernetes.Interface, o Options) error {
	return run(ctx, clients{api: client, leader: leaderClient, events: eventsClient}, o)
}

// Internals for the black-box tests of package app_test.
var (
	NodeHandler = nodeHandler
	PodHandler  = podHandler
)
