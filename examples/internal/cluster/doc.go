// Package cluster is a small in-memory stand-in for the parts of a Kubernetes
// API server and its informers that a NoExecute taint manager touches: nodes,
// pods, lookups shaped like informer listers, a pod client with UID
// preconditions, PodDisruptionBudgets with the Eviction API that honours them,
// and change notifications shaped like informer event handlers.
//
// It exists so that the noexecute example and its tests can run a complete
// taint manager without a cluster. It is not a general fake API server: it
// models only what the manager needs, but it models that faithfully (NotFound,
// Conflict and TooManyRequests errors from k8s.io/apimachinery, immutable
// cached objects, in-order notifications).
//
// # Model
//
// A [Cluster] holds nodes by name and pods by namespace and name. Every write
// stores a fresh copy; readers get the stored pointer, which nobody modifies
// afterwards, exactly as with an informer's cache: callers must not modify
// objects they read (copy them with DeepCopy first).
//
// Pods get a UID when added without one (uid-1, uid-2, … in order, so runs are
// reproducible), the phase Pending when added without one, and a PodScheduled
// condition whose LastTransitionTime is the time they were bound to a node
// ([Cluster.AddPodAsIs] leaves it out, as for a pod created with its node
// name set). NoExecute taints added through
// [Cluster.SetTaints] get a TimeAdded, as the node lifecycle controller sets
// it; [Cluster.UpdateNode] stores taints as given (kubelet's
// --register-with-taints sets no TimeAdded).
//
// No kubelet runs: a pod stays Pending and not ready until
// [Cluster.SetPodReady] reports it Running and Ready.
//
// [Cluster.DeletePod] honours [metav1.Preconditions] UIDs: a UID that does not
// match the stored pod fails with a Conflict error and deletes nothing. A
// positive grace period marks the pod terminating (DeletionTimestamp set)
// instead of removing it. Failures can be injected per pod, for deletes and
// evictions alike, to exercise retries: server errors with
// [Cluster.FailDeletes], API throttling (429) with [Cluster.ThrottleDeletes].
//
// # Disruption budgets
//
// [Cluster.AddPDB] stores a policy/v1 PodDisruptionBudget with an integer
// minAvailable. The disruption controller is instant: a budget's status is
// computed whenever it is read or consulted, from the pods it covers, so it
// is never stale and needs no one to write it. [Cluster.EvictPod] is the
// Eviction API: it checks the budget covering a running pod, refuses with a
// 429 carrying a DisruptionBudget status cause when the budget allows no
// disruption, and otherwise marks the pod DisruptionTarget and deletes it as
// DeletePod does. [Cluster.Stats] counts evictions let through and refused.
//
// # Time
//
// Timestamps (CreationTimestamp, condition transitions, TimeAdded,
// DeletionTimestamp) come from the [clock.PassiveClock] given to [New], so a
// FakeClock makes them deterministic.
//
// # Concurrency
//
// A Cluster is safe for concurrent use by multiple goroutines. Handlers
// registered with [Cluster.OnNode] and [Cluster.OnPod] are called
// synchronously by the goroutine that made the change, after the change is
// visible to readers, one change at a time and in the order the changes were
// made. A handler may read the cluster but must not write to it (that would
// deadlock), and should return quickly, as informer handlers should.
package cluster
