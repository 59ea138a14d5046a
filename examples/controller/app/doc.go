// Package app is the NoExecute taint controller: the manager of
// examples/internal/manager wired to a Kubernetes API server with
// client-go, as cmd packages wire controllers.
//
// [Run] starts shared informers for nodes and pods (the pods indexed by
// spec.nodeName), waits for their caches, and feeds their events to the
// manager, whose lookups read the informers' listers. The manager deletes
// through a [kube.PodClient]: it sets the pod's DisruptionTarget condition
// (reason DeletionByTaintManager) with a patch of pods/status, then deletes
// the pod with its UID as precondition, so a pod recreated under the same
// name is never deleted in its predecessor's place. Events ("Scheduled for
// deletion at …", "Marking for deletion", "Cancelling deletion") go through
// an event sink of its own with two bounded queues, one for the countdowns'
// events, written by several goroutines each on a client of their own
// (Options.EventsQPS and EventsBurst); an event that cannot be written is
// counted in taintkit_events_dropped_total.
//
// # Safe eviction
//
// Options.UseEvictionAPI evicts through the Eviction API instead
// ([kube.PodClient.EvictPod]), which honours PodDisruptionBudgets; a budget's
// refusal is retried, and Options.EvictionFallbackAfter (zero: never) turns
// it into a direct delete that long past the pod's deadline.
// Options.EvictionRate and EvictionBurst bound how many evictions start per
// second, optionally per namespace; Options.DryRun decides and counts but
// writes nothing to pods. Each maps to a field of the manager's Config.
//
// # Device taints
//
// With Options.DeviceTaints, Run also watches ResourceSlices,
// DeviceTaintRules and ResourceClaims (caching only what it reads) and gives
// the manager each pod's allocated devices with their taints: one decision
// per pod of its node's and its devices' taints, one eviction path. A
// claim's devices are a pod's as Kubernetes' device-taint-eviction
// controller reads them (k8s.io/dynamic-resource-allocation's resourceclaim
// helpers): the claim is allocated and reserved for the pod or its
// PodGroup, and one made from a template is the pod's or its PodGroup's. The leader writes each rule's
// EvictionInProgress status (server-side apply of devicetaintrules/status,
// at most every 10 s a rule, as upstream words it). A rule whose NoExecute
// taint would evict more than Options.DeviceTaintRuleMaxPods pods is held
// (it evicts nothing; status TooManyPods, a Warning event in namespace
// default), counted again whenever a rule, a claim or a pod changes, on
// every replica.
//
// # Replicas
//
// With leader election (the default) the manager runs only while the
// replica holds a coordination.k8s.io Lease. Its pod writes and events
// leave only while its last renewal of the Lease that succeeded is younger
// than the renew deadline, checked in the clients' transport as each
// request goes (package leasefence), and its release of the Lease on
// shutdown never empties a Lease another replica has taken. A replica that
// loses the Lease stops acting at once and Run returns [ErrLeaderLost];
// the process exits and its restart is a fresh standby. Countdowns survive
// a change of leader:
// the manager computes deadlines from the taint's TimeAdded and the pod's
// PodScheduled time, so the new leader's deadlines are the old one's.
//
// # Observability
//
// /metrics serves [kube.Metrics] (names in kube's Metric constants) and the Go
// runtime's metrics, and /debug/evictions on the same server the scheduled
// evictions as JSON ([EvictionsHandler]). With Options.MetricsSecure (the
// default) that server speaks HTTPS and lets through only requests whose
// bearer token the API server authenticates and authorizes for the path
// ([MetricsFilter]). /healthz, plain HTTP on another port, fails when the
// leader election is stuck; /readyz turns 200 once the informer caches are
// synced. Logs go through klog (structured; -v 2 for decisions, -v 4 for
// details).
//
// # Permissions
//
// The controller lists and watches nodes and pods, patches pods/status and
// deletes pods (without UseEvictionAPI, or for its fallback), creates
// pods/eviction (with UseEvictionAPI), creates events, creates
// TokenReviews and SubjectAccessReviews (with MetricsSecure), and gets,
// creates and updates its Lease; with DeviceTaints it lists and watches
// resourceslices, resourceclaims and devicetaintrules and patches
// devicetaintrules/status. deploy/ in this module and its components grant
// exactly that.
package app
