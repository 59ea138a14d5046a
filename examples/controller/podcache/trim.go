package podcache

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Trim returns a new pod holding only what a taint-eviction controller
// reads from pod: the pod's identity (name, namespace, UID,
// resourceVersion) and deletionTimestamp; spec.nodeName, spec.tolerations,
// spec.resourceClaims and spec.schedulingGroup; the PodScheduled condition,
// which tolerations.PodBoundAt reads, and the DisruptionTarget condition,
// which an eviction sets; status.resourceClaimStatuses and
// status.extendedResourceClaimStatus. With the claims and the scheduling
// group, k8s.io/dynamic-resource-allocation's resourceclaim helpers find
// the claims a pod uses and whether they are reserved for it or its
// PodGroup.
//
// The tolerations package's Decide and every method of its Countdowns
// decide the same for the result as for pod. The result shares no memory
// with pod. Trim(nil) is nil.
func Trim(pod *v1.Pod) *v1.Pod {
	if pod == nil {
		return nil
	}
	trimmed := &v1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			DeletionTimestamp: pod.DeletionTimestamp.DeepCopy(),
		},
		Spec: v1.PodSpec{
			NodeName:        pod.Spec.NodeName,
			SchedulingGroup: pod.Spec.SchedulingGroup.DeepCopy(),
		},
	}
	if pod.Spec.Tolerations != nil {
		trimmed.Spec.Tolerations = make([]v1.Toleration, len(pod.Spec.Tolerations))
		for i := range pod.Spec.Tolerations {
			pod.Spec.Tolerations[i].DeepCopyInto(&trimmed.Spec.Tolerations[i])
		}
	}
	if pod.Spec.ResourceClaims != nil {
		trimmed.Spec.ResourceClaims = make([]v1.PodResourceClaim, len(pod.Spec.ResourceClaims))
		for i := range pod.Spec.ResourceClaims {
			pod.Spec.ResourceClaims[i].DeepCopyInto(&trimmed.Spec.ResourceClaims[i])
		}
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodScheduled || c.Type == v1.DisruptionTarget {
			trimmed.Status.Conditions = append(trimmed.Status.Conditions, *c.DeepCopy())
		}
	}
	if pod.Status.ResourceClaimStatuses != nil {
		trimmed.Status.ResourceClaimStatuses = make([]v1.PodResourceClaimStatus, len(pod.Status.ResourceClaimStatuses))
		for i := range pod.Status.ResourceClaimStatuses {
			pod.Status.ResourceClaimStatuses[i].DeepCopyInto(&trimmed.Status.ResourceClaimStatuses[i])
		}
	}
	trimmed.Status.ExtendedResourceClaimStatus = pod.Status.ExtendedResourceClaimStatus.DeepCopy()
	return trimmed
}
