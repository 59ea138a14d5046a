package testenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// NewPod returns a pod with one container and the given tolerations, not yet
// created and not yet on a node.
func NewPod(namespace, name string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Tolerations: tolerations,
		},
	}
}

// CreatePodOnNode creates pod with spec.nodeName set to nodeName, as a
// DaemonSet controller or a user bypassing the scheduler does. The pod has no
// PodScheduled condition: the server drops the status of a create.
func CreatePodOnNode(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, nodeName string) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	pod.Spec.NodeName = nodeName
	created, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return created, nil
}

// CreateBoundPod creates pod without a node and binds it to nodeName through
// the pods/binding subresource, as the scheduler does. The returned pod has
// spec.nodeName set and a PodScheduled condition that is True, whose
// LastTransitionTime (whole seconds) is when the pod was bound.
func CreateBoundPod(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, nodeName string) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	pod.Spec.NodeName = ""
	pods := c.CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: created.Namespace, Name: created.Name, UID: created.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := pods.Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("testenv: binding pod %s/%s to %s: %w", pod.Namespace, pod.Name, nodeName, err)
	}
	// The binding also sets PodScheduled, as the scheduler would by a status
	// update (TestPodLifecycle checks that it does).
	bound, err := pods.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: binding pod %s/%s to %s: %w", pod.Namespace, pod.Name, nodeName, err)
	}
	return bound, nil
}

// MarkPodReady reports the pod Running with all of its containers ready, as
// the kubelet does once they have started, and returns the updated pod.
func MarkPodReady(ctx context.Context, c kubernetes.Interface, namespace, name string) (*corev1.Pod, error) {
	pod, err := updatePodStatus(ctx, c, namespace, name, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodRunning
		for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			setPodCondition(st, t)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: marking pod %s/%s ready: %w", namespace, name, err)
	}
	return pod, nil
}

// updatePodStatus applies change to the pod's status with an update of the
// status subresource, retrying on conflicts with other writers.
func updatePodStatus(ctx context.Context, c kubernetes.Interface, namespace, name string, change func(*corev1.PodStatus)) (*corev1.Pod, error) {
	pods := c.CoreV1().Pods(namespace)
	var updated *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&pod.Status)
		updated, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	return updated, err
}

// setPodCondition makes condition t True, stamping the transition time only
// when it was not True already.
func setPodCondition(st *corev1.PodStatus, t corev1.PodConditionType) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			if st.Conditions[i].Status != corev1.ConditionTrue {
				st.Conditions[i].Status = corev1.ConditionTrue
				st.Conditions[i].LastTransitionTime = metav1.NewTime(time.Now())
			}
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{
		Type:               t,
		Status:             corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(time.Now()),
	})
}
