package kubecr_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/taintkit/taintkit/examples/internal/kube"
	"github.com/taintkit/taintkit/examples/internal/kube/kubecr"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
	"github.com/taintkit/taintkit/tolerations"
)

// disruptionTarget is the condition the manager sets.
var disruptionTarget = v1.PodCondition{
	Type:    v1.DisruptionTarget,
	Status:  v1.ConditionTrue,
	Reason:  tolerations.ReasonDeletionByTaintManager,
	Message: "Taint manager: deleting due to NoExecute taint",
}

func uidOptions(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// On a controller-runtime client the PodClient sends the same three
// requests as on a clientset, through the client (its interceptors see
// them): the status patch carrying the UID, the DELETE with the UID
// precondition, the eviction with the manager's DeleteOptions.
func TestPodClientOnControllerRuntime(t *testing.T) {
	ctx := t.Context()
	pod := kubetest.Pod("web", "uid-1")
	base := fake.NewClientBuilder().WithObjects(pod).WithStatusSubresource(&v1.Pod{}).Build()
	var sent []string
	c := &kube.PodClient{API: kubecr.PodAPI(interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			data, err := patch.Data(obj)
			require.NoError(t, err)
			var body struct {
				Metadata struct{ UID types.UID }
				Status   struct{ Conditions []v1.PodCondition }
			}
			require.NoError(t, json.Unmarshal(data, &body))
			assert.Equal(t, types.StrategicMergePatchType, patch.Type())
			assert.Equal(t, types.UID("uid-1"), body.Metadata.UID)
			require.Len(t, body.Status.Conditions, 1)
			sent = append(sent, "patch "+sub+" "+obj.GetName()+" "+string(body.Status.Conditions[0].Type))
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			do := &client.DeleteOptions{}
			do.ApplyOptions(opts)
			require.NotNil(t, do.Preconditions)
			sent = append(sent, "delete "+obj.GetName()+" "+string(*do.Preconditions.UID))
			return nil
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			ev, ok := subObj.(*policyv1.Eviction)
			require.True(t, ok, "%T", subObj)
			require.NotNil(t, ev.DeleteOptions)
			sent = append(sent, "create "+sub+" "+obj.GetName()+" "+ev.Name+" "+string(*ev.DeleteOptions.Preconditions.UID))
			return nil
		},
	}))}

	require.NoError(t, c.SetPodCondition(ctx, "default", "web", "uid-1", disruptionTarget))
	require.NoError(t, c.DeletePod(ctx, "default", "web", uidOptions("uid-1")))
	require.NoError(t, c.EvictPod(ctx, "default", "web", uidOptions("uid-1")))
	assert.Equal(t, []string{
		"patch status web DisruptionTarget",
		"delete web uid-1",
		"create eviction web web uid-1",
	}, sent)
	got := &v1.Pod{}
	require.NoError(t, base.Get(ctx, client.ObjectKeyFromObject(pod), got))
	require.Len(t, got.Status.Conditions, 1, "the status patch went through")
	assert.Equal(t, v1.DisruptionTarget, got.Status.Conditions[0].Type)
}
