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

// RunWithMetricsFilter is RunWithClients with filter in front of the
// metrics server, where Run puts controller-runtime's authenticating one.
func RunWithMetricsFilter(ctx context.Context, client kubernetes.Interface, filter MetricsFilter, o Options) error {
	return run(ctx, clients{api: client, leader: client, events: client, metricsFilter: filter}, o)
}

// Internals for the black-box tests of package app_test.
var (
	NodeHandler = nodeHandler
	PodHandler  = podHandler
	Trim        = trim
)
