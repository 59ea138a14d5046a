package app_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
)

// deviceTaintCalls are the calls --device-taints adds to those of node
// taints, as the feature is specified: informers of ResourceSlices,
// DeviceTaintRules and ResourceClaims, patches of a rule's status, and
// events about a rule (cluster-scoped) in the namespace default.
func deviceTaintCalls() []clienttesting.Action {
	var calls []clienttesting.Action
	for _, r := range []string{"resourceslices", "devicetaintrules", "resourceclaims"} {
		gvr := resourcev1.SchemeGroupVersion.WithResource(r)
		calls = append(calls,
			clienttesting.NewRootListAction(gvr, resourcev1.SchemeGroupVersion.WithKind("List"), metav1.ListOptions{}),
			clienttesting.NewRootWatchAction(gvr, metav1.ListOptions{}))
	}
	events := v1.SchemeGroupVersion.WithResource("events")
	return append(calls,
		clienttesting.NewRootPatchSubresourceAction(resourcev1.SchemeGroupVersion.WithResource("devicetaintrules"),
			"rule", types.StrategicMergePatchType, []byte(`{}`), "status"),
		clienttesting.NewCreateAction(events, metav1.NamespaceDefault, &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "rule.1"}}))
}

// The component device-taints, alone and with each way of evicting: it
// adds --device-taints to the Deployment and grants every call the feature
// adds, and nothing else; without it nothing of resource.k8s.io is granted.
func TestDeployDeviceTaintsComponent(t *testing.T) {
	for _, c := range combinations {
		t.Run(c.name, func(t *testing.T) {
			// The combination's other component, if any.
			other := c.component
			if other == "device-taints" {
				other = ""
			}
			without := build(t, other)
			base := grants(without)
			for _, g := range base {
				assert.NotContains(t, g.rule.APIGroups, resourcev1.GroupName, "granted without the component: %+v", g)
			}
			require.Len(t, without.deployments, 1)
			baseArgs := without.deployments[0].Spec.Template.Spec.Containers[0].Args
			assert.NotContains(t, baseArgs, "--device-taints")

			with := build(t, other, "device-taints")
			require.Len(t, with.deployments, 1)
			assert.Equal(t, append(slices.Clone(baseArgs), "--device-taints"), with.deployments[0].Spec.Template.Spec.Containers[0].Args)
			g := grants(with)
			used := make([]map[string]bool, len(g))
			for i := range used {
				used[i] = map[string]bool{}
			}
			for _, a := range deviceTaintCalls() {
				i := allowedBy(g, a)
				if assert.GreaterOrEqual(t, i, 0, "forbidden: %s %s/%s in %q",
					a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), a.GetNamespace()) {
					used[i][a.GetVerb()] = true
				}
			}
			for i, gr := range g {
				if slices.ContainsFunc(base, func(b grant) bool { return assert.ObjectsAreEqual(b, gr) }) {
					continue // the base's, checked against a run of the controller
				}
				for _, verb := range gr.rule.Verbs {
					assert.True(t, used[i][verb], "granted but never used: %s %v in %q", verb, gr.rule.Resources, gr.namespace)
				}
			}
		})
	}
}
