package testenv

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// NoExecuteTaint returns a NoExecute taint whose TimeAdded is now, as the node
// lifecycle controller stamps the taints it adds. TimeAdded is in whole
// seconds, the value the server stores, so a deadline computed from it is
// the deadline a controller computes from the stored node.
//
// For a taint without TimeAdded, as another tool may add, write the
// [corev1.Taint] literal.
func NoExecuteTaint(key, value string) corev1.Taint {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now}
}

// CreateNode creates a node that carries exactly taints. The API server's
// admission adds a node.kubernetes.io/not-ready NoSchedule taint to a new node,
// which the node lifecycle controller would remove once the kubelet reports
// Ready; CreateNode removes it unless it is among taints. The node's status is
// left empty.
func CreateNode(ctx context.Context, c kubernetes.Interface, name string, taints ...corev1.Taint) (*corev1.Node, error) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: CreateNode %s: %w", name, err)
	}
	if len(created.Spec.Taints) == len(taints) {
		return created, nil
	}
	return updateNodeTaints(ctx, c, name, func([]corev1.Taint) []corev1.Taint { return taints })
}

// TaintNode adds taint to the node, replacing a taint with the same key and
// effect, and returns the updated node.
func TaintNode(ctx context.Context, c kubernetes.Interface, name string, taint corev1.Taint) (*corev1.Node, error) {
	return updateNodeTaints(ctx, c, name, func(taints []corev1.Taint) []corev1.Taint {
		taints = slices.DeleteFunc(taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
		return append(taints, taint)
	})
}

// UntaintNode removes the node's taint with key and effect, if there is one,
// and returns the updated node.
func UntaintNode(ctx context.Context, c kubernetes.Interface, name, key string, effect corev1.TaintEffect) (*corev1.Node, error) {
	match := corev1.Taint{Key: key, Effect: effect}
	return updateNodeTaints(ctx, c, name, func(taints []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(taints, func(t corev1.Taint) bool { return t.MatchTaint(&match) })
	})
}

// updateNodeTaints replaces the node's taints with change(taints), retrying
// on conflicts with other writers.
func updateNodeTaints(ctx context.Context, c kubernetes.Interface, name string, change func([]corev1.Taint) []corev1.Taint) (*corev1.Node, error) {
	var updated *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = change(slices.Clone(node.Spec.Taints))
		updated, err = c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: updating the taints of node %s: %w", name, err)
	}
	return updated, nil
}
