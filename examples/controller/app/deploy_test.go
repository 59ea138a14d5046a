package app_test

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/internal/kube/kubetest"
)

// manifests holds the objects of a kustomize build of deploy/.
type manifests struct {
	serviceAccounts     []v1.ServiceAccount
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roles               []rbacv1.Role
	roleBindings        []rbacv1.RoleBinding
	deployments         []appsv1.Deployment
	budgets             []policyv1.PodDisruptionBudget
}

// combinations are what an operator may deploy: deploy/ alone, or with one
// of its components (each for a way of evicting, or for device taints), as
// kubectl apply -k builds them.
var combinations = []struct {
	name      string
	component string // under deploy/components; "" for none
}{
	{"deploy", ""},
	{"deploy+eviction-api", "eviction-api"},
	{"deploy+eviction-api-with-fallback", "eviction-api-with-fallback"},
	{"deploy+device-taints", "device-taints"},
}

// build builds deploy/, with components (directories under
// deploy/components; "" for none), with kustomize's own library, as
// kubectl apply -k would. Components are added by an overlay of the
// operator's: one in a temporary directory here (kustomize refuses an
// overlay inside the directory of its base).
func build(t *testing.T, components ...string) manifests {
	t.Helper()
	deploy, err := filepath.Abs("../deploy")
	require.NoError(t, err)
	dir := deploy
	if components = slices.DeleteFunc(components, func(c string) bool { return c == "" }); len(components) > 0 {
		dir = t.TempDir()
		rel, err := filepath.Rel(dir, deploy)
		require.NoError(t, err)
		kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
			"resources:\n  - " + filepath.ToSlash(rel) + "\n" + "components:\n"
		for _, c := range components {
			kustomization += "  - " + filepath.ToSlash(filepath.Join(rel, "components", c)) + "\n"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644))
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	var m manifests
	for _, r := range resources.Resources() {
		doc, err := r.AsYAML()
		require.NoError(t, err)
		var target any
		switch r.GetKind() {
		case "ServiceAccount":
			m.serviceAccounts = append(m.serviceAccounts, v1.ServiceAccount{})
			target = &m.serviceAccounts[len(m.serviceAccounts)-1]
		case "ClusterRole":
			m.clusterRoles = append(m.clusterRoles, rbacv1.ClusterRole{})
			target = &m.clusterRoles[len(m.clusterRoles)-1]
		case "ClusterRoleBinding":
			m.clusterRoleBindings = append(m.clusterRoleBindings, rbacv1.ClusterRoleBinding{})
			target = &m.clusterRoleBindings[len(m.clusterRoleBindings)-1]
		case "Role":
			m.roles = append(m.roles, rbacv1.Role{})
			target = &m.roles[len(m.roles)-1]
		case "RoleBinding":
			m.roleBindings = append(m.roleBindings, rbacv1.RoleBinding{})
			target = &m.roleBindings[len(m.roleBindings)-1]
		case "Deployment":
			m.deployments = append(m.deployments, appsv1.Deployment{})
			target = &m.deployments[len(m.deployments)-1]
		case "PodDisruptionBudget":
			m.budgets = append(m.budgets, policyv1.PodDisruptionBudget{})
			target = &m.budgets[len(m.budgets)-1]
		default:
			t.Fatalf("%s: unexpected kind %q", dir, r.GetKind())
		}
		require.NoError(t, yaml.UnmarshalStrict(doc, target), "%s: %s", dir, r.CurId())
	}
	return m
}

// subject is the controller's ServiceAccount, as deploy/ names it.
var subject = rbacv1.Subject{Kind: "ServiceAccount", Name: "taintkit-noexecute", Namespace: "kube-system"}

// options returns the options of the Deployment's arguments, failing the
// test if they are not flags the binary has, with valid values.
func options(t *testing.T, d appsv1.Deployment) app.Options {
	t.Helper()
	o := app.NewOptions()
	fs := flagSet(&o)
	args := d.Spec.Template.Spec.Containers[0].Args
	require.NoError(t, fs.Parse(args), "args %q", args)
	require.NoError(t, o.Validate(), "args %q", args)
	return o
}

func TestDeployManifests(t *testing.T) {
	m := build(t, "")
	require.Len(t, m.serviceAccounts, 1)
	sa := m.serviceAccounts[0]
	assert.Equal(t, subject, rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace})

	// Every binding binds the ServiceAccount to a role of deploy/'s.
	roles := map[rbacv1.RoleRef]bool{}
	for _, r := range m.clusterRoles {
		roles[rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name}] = true
	}
	for _, b := range m.clusterRoleBindings {
		assert.True(t, roles[b.RoleRef], "%s binds an unknown role %v", b.Name, b.RoleRef)
		assert.Equal(t, []rbacv1.Subject{subject}, b.Subjects, b.Name)
	}
	require.Len(t, m.roles, 1)
	require.Len(t, m.roleBindings, 1)
	assert.Equal(t, "kube-system", m.roles[0].Namespace)
	assert.Equal(t, "kube-system", m.roleBindings[0].Namespace)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.roles[0].Name}, m.roleBindings[0].RoleRef)
	assert.Equal(t, []rbacv1.Subject{subject}, m.roleBindings[0].Subjects)

	// The readers of the metrics server: a permission each, bound to no one.
	for name, url := range map[string]string{
		"taintkit-noexecute-metrics-reader":   "/metrics",
		"taintkit-noexecute-evictions-reader": app.DebugEvictionsPath,
	} {
		i := slices.IndexFunc(m.clusterRoles, func(r rbacv1.ClusterRole) bool { return r.Name == name })
		require.GreaterOrEqual(t, i, 0, "no ClusterRole %s", name)
		assert.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{url}, Verbs: []string{"get"}}}, m.clusterRoles[i].Rules, name)
		assert.False(t, slices.ContainsFunc(m.clusterRoleBindings, func(b rbacv1.ClusterRoleBinding) bool { return b.RoleRef.Name == name }),
			"%s is bound by deploy/", name)
	}

	require.Len(t, m.deployments, 1)
	d := m.deployments[0]
	assert.Equal(t, "kube-system", d.Namespace)
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	pod := d.Spec.Template.Spec
	assert.Equal(t, sa.Name, pod.ServiceAccountName)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, map[string]int32{"https": 8443, "health": 8081}, ports)
	assert.Equal(t, "health", c.LivenessProbe.HTTPGet.Port.StrVal)
	assert.Equal(t, "health", c.ReadinessProbe.HTTPGet.Port.StrVal)
	assert.Equal(t, v1.URISchemeHTTP, cmp.Or(c.LivenessProbe.HTTPGet.Scheme, v1.URISchemeHTTP), "the probes are plain HTTP")
	assert.Equal(t, "https", d.Spec.Template.Annotations["prometheus.io/scheme"])
	assert.Equal(t, "8443", d.Spec.Template.Annotations["prometheus.io/port"])
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.NotNil(t, c.Resources.Requests.Cpu())

	o := options(t, d)
	assert.Equal(t, m.roles[0].Namespace, o.LeaseNamespace, "the Role is in the lease's namespace")
	assert.Equal(t, ":8443", o.MetricsBindAddress)
	assert.True(t, o.MetricsSecure)
	assert.Equal(t, ":8081", o.HealthProbeBindAddress)
	assert.Greater(t, *pod.TerminationGracePeriodSeconds, int64(o.ShutdownGracePeriod/time.Second),
		"the kubelet must not kill the pod before the shutdown grace period is over")

	// A drain takes one replica at a time: the other keeps or takes the
	// Lease.
	require.Len(t, m.budgets, 1)
	pdb := m.budgets[0]
	assert.Equal(t, d.Namespace, pdb.Namespace)
	assert.Equal(t, intstr.FromInt32(1), *pdb.Spec.MinAvailable)
	assert.Nil(t, pdb.Spec.MaxUnavailable)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "the budget does not select the controller's pods")
	assert.Less(t, pdb.Spec.MinAvailable.IntValue(), int(*d.Spec.Replicas), "the budget allows no disruption")
}

// Each component adds what its flags need and takes away what they make
// unused, and nothing else.
func TestDeployComponents(t *testing.T) {
	for _, c := range combinations {
		t.Run(c.name, func(t *testing.T) {
			m := build(t, c.component)
			require.Len(t, m.deployments, 1)
			o := options(t, m.deployments[0])
			assert.Equal(t, c.component == "device-taints", o.DeviceTaints, "--device-taints")
			switch c.component {
			case "":
				assert.False(t, o.UseEvictionAPI)
			case "eviction-api":
				assert.True(t, o.UseEvictionAPI)
				assert.Zero(t, o.EvictionFallbackAfter)
			case "eviction-api-with-fallback":
				assert.True(t, o.UseEvictionAPI)
				assert.Equal(t, 10*time.Minute, o.EvictionFallbackAfter)
			case "device-taints":
				assert.False(t, o.UseEvictionAPI)
				assert.Equal(t, app.DefaultDeviceTaintRuleMaxPods, o.DeviceTaintRuleMaxPods)
			}
		})
	}
}

// grant is a policy rule and where it applies ("" is every namespace).
type grant struct {
	namespace string
	rule      rbacv1.PolicyRule
}

// grants returns the rules of the roles bound to the controller's
// ServiceAccount.
func grants(m manifests) []grant {
	bound := func(subjects []rbacv1.Subject) bool { return slices.Contains(subjects, subject) }
	var g []grant
	for _, r := range m.clusterRoles {
		if !slices.ContainsFunc(m.clusterRoleBindings, func(b rbacv1.ClusterRoleBinding) bool {
			return b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == r.Name && bound(b.Subjects)
		}) {
			continue
		}
		for _, rule := range r.Rules {
			g = append(g, grant{"", rule})
		}
	}
	for _, r := range m.roles {
		if !slices.ContainsFunc(m.roleBindings, func(b rbacv1.RoleBinding) bool {
			return b.Namespace == r.Namespace && b.RoleRef.Kind == "Role" && b.RoleRef.Name == r.Name && bound(b.Subjects)
		}) {
			continue
		}
		for _, rule := range r.Rules {
			g = append(g, grant{r.Namespace, rule})
		}
	}
	return g
}

// allowedBy returns the index of the first grant that allows a, or -1, by
// RBAC's rules (no wildcards are used in the manifests).
func allowedBy(g []grant, a clienttesting.Action) int {
	resource := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	name := actionName(a)
	if a.GetVerb() == "create" && a.GetSubresource() == "" {
		name = "" // the object does not exist yet: RBAC sees no name
	}
	for i, gr := range g {
		if gr.namespace != "" && gr.namespace != a.GetNamespace() {
			continue
		}
		r := gr.rule
		if slices.Contains(r.Verbs, a.GetVerb()) &&
			slices.Contains(r.APIGroups, a.GetResource().Group) &&
			slices.Contains(r.Resources, resource) &&
			(len(r.ResourceNames) == 0 || name != "" && slices.Contains(r.ResourceNames, name)) {
			return i
		}
	}
	return -1
}

// controllerActions runs the controller with o on a fake API server
// through a scenario that makes it use every call it can make with o:
// start-up and the lease, evictions (one refused by a budget, so that a
// fallback deletes it with --use-eviction-api; one of a pod bound after the
// taint, which reads the node first), cancellations, repeated
// events, a DeviceTaintRule whose taint evicts a pod through its claim
// (its status written, with --device-taints), shutdown. It returns the
// controller's calls (not the test's).
func controllerActions(t *testing.T, o app.Options) []clienttesting.Action {
	var actions []clienttesting.Action
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		node := taintedNode("node-1", t0)
		// gpu tolerates the node's taint for ever: the rule's taint on its
		// device evicts it.
		gpu, claim := gpuPod("gpu", 0, t0, nil)
		gpu.Spec.Tolerations = boundPod("", "", "", t0, ptr.To(time.Duration(-1))).Spec.Tolerations
		client := newFakeAPI(node,
			boundPod("web", "uid-web", "node-1", t0, nil),
			boundPod("api", "uid-api", "node-1", t0, nil),
			boundPod("db", "uid-db", "node-1", t0, ptr.To(time.Hour)),
			// Bound after the taint: the node is read before it is evicted.
			boundPod("late", "uid-late", "node-1", t0.Add(time.Second), nil),
			gpuSlice(1), gpu, claim, brokenRule("broken", resourcev1.DeviceTaintSelector{Pool: ptr.To("pool")}, t0))
		kubetest.RefuseEvictions(client, func(_, name string) bool { return name == "api" })
		r := start(t, client, o)
		synctest.Wait()
		// The test's own writes are not the controller's: note where they
		// are in the fake's log (nothing else runs while the test writes).
		mine := map[int]bool{}
		update := func(n *v1.Node) {
			mine[len(client.Actions())] = true
			_, err := client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
			require.NoError(t, err)
			synctest.Wait()
		}
		// Cancelled twice: the second, identical event is created too.
		for range 2 {
			node.Spec.Taints = nil
			update(node)
			node = taintedNode("node-1", t0)
			update(node)
		}
		if o.EvictionFallbackAfter > 0 {
			time.Sleep(o.EvictionFallbackAfter)
			synctest.Wait()
			_, err := client.Tracker().Get(podsResource, "default", "api") // not an action
			require.True(t, apierrors.IsNotFound(err), "not deleted by the fallback: %v", err)
		}
		_, err := client.Tracker().Get(podsResource, "default", "gpu") // not an action
		require.Equal(t, o.DeviceTaints, apierrors.IsNotFound(err), "gpu evicted for its device's taint: %v", err)
		require.NoError(t, r.stop()) // releases the lease
		for i, a := range client.Actions() {
			if !mine[i] {
				actions = append(actions, a)
			}
		}
		require.Len(t, actions, len(client.Actions())-4)
	})
	return actions
}

// metricsAuthCalls are the calls of metricsauth's authenticating
// filter, made for a request to the metrics server with --metrics-secure:
// a TokenReview of its bearer token and a SubjectAccessReview of its path.
// A fake clientset cannot stand in for the API server there (the filter
// builds its own clients from a rest.Config): integration/serving_test.go
// makes these calls as the ServiceAccount against a real API server, which
// fails if one is refused.
func metricsAuthCalls() []clienttesting.Action {
	return []clienttesting.Action{
		clienttesting.NewRootCreateAction(authenticationv1.SchemeGroupVersion.WithResource("tokenreviews"), &authenticationv1.TokenReview{}),
		clienttesting.NewRootCreateAction(authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews"), &authorizationv1.SubjectAccessReview{}),
	}
}

// In each combination the RBAC bound to the controller allows every call
// it makes with the Deployment's flags, and every verb it grants is one the
// controller uses with them. (The integration tests prove the first
// against a real API server.)
func TestDeployRBACIsSufficientAndMinimal(t *testing.T) {
	for _, c := range combinations {
		t.Run(c.name, func(t *testing.T) {
			m := build(t, c.component)
			g := grants(m)
			used := make([]map[string]bool, len(g))
			for i := range used {
				used[i] = map[string]bool{}
			}
			deployed := options(t, m.deployments[0])
			// The flags of the Deployment, with the test's lease times and
			// servers (the fake API server cannot answer the metrics
			// server's reviews: metricsAuthCalls stands in for them).
			o := leaderOptions("replica-a")
			o.UseEvictionAPI, o.EvictionFallbackAfter, o.DryRun = deployed.UseEvictionAPI, deployed.EvictionFallbackAfter, deployed.DryRun
			o.EvictionRate, o.EvictionBurst, o.EvictionRatePerNamespace = deployed.EvictionRate, deployed.EvictionBurst, deployed.EvictionRatePerNamespace
			o.DeviceTaints, o.DeviceTaintRuleMaxPods = deployed.DeviceTaints, deployed.DeviceTaintRuleMaxPods
			actions := controllerActions(t, o)
			if deployed.MetricsSecure && deployed.MetricsBindAddress != "0" {
				actions = append(actions, metricsAuthCalls()...)
			}
			for _, a := range actions {
				i := allowedBy(g, a)
				if !assert.GreaterOrEqual(t, i, 0, "forbidden: %s %s/%s in %q",
					a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), a.GetNamespace()) {
					continue
				}
				used[i][a.GetVerb()] = true
			}
			for i, gr := range g {
				for _, verb := range gr.rule.Verbs {
					assert.True(t, used[i][verb], "granted but never used: %s %v in %q", verb, gr.rule.Resources, gr.namespace)
				}
			}
		})
	}
}
