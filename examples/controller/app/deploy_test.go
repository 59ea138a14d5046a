package app_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/taintkit/taintkit/examples/controller/app"
)

// manifests holds the objects of deploy/*.yaml.
type manifests struct {
	serviceAccounts     []v1.ServiceAccount
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roles               []rbacv1.Role
	roleBindings        []rbacv1.RoleBinding
	deployments         []appsv1.Deployment
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("../deploy/*.yaml")
	require.NoError(t, err)
	var m manifests
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for doc := range strings.SplitSeq(string(data), "\n---\n") {
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal([]byte(doc), &tm), f)
			var target any
			switch tm.Kind {
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
			default:
				t.Fatalf("%s: unexpected kind %q", f, tm.Kind)
			}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), target), f)
		}
	}
	return m
}

func TestDeployManifests(t *testing.T) {
	m := readManifests(t)
	require.Len(t, m.serviceAccounts, 1)
	sa := m.serviceAccounts[0]
	assert.Equal(t, "taintkit-noexecute", sa.Name)
	assert.Equal(t, "kube-system", sa.Namespace)
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}

	require.Len(t, m.clusterRoles, 1)
	require.Len(t, m.clusterRoleBindings, 1)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: m.clusterRoles[0].Name}, m.clusterRoleBindings[0].RoleRef)
	assert.Equal(t, []rbacv1.Subject{subject}, m.clusterRoleBindings[0].Subjects)
	require.Len(t, m.roles, 1)
	require.Len(t, m.roleBindings, 1)
	assert.Equal(t, "kube-system", m.roles[0].Namespace)
	assert.Equal(t, "kube-system", m.roleBindings[0].Namespace)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.roles[0].Name}, m.roleBindings[0].RoleRef)
	assert.Equal(t, []rbacv1.Subject{subject}, m.roleBindings[0].Subjects)

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
	assert.Equal(t, map[string]int32{"metrics": 8080, "health": 8081}, ports)
	assert.Equal(t, "health", c.LivenessProbe.HTTPGet.Port.StrVal)
	assert.Equal(t, "health", c.ReadinessProbe.HTTPGet.Port.StrVal)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.NotNil(t, c.Resources.Requests.Cpu())

	// The arguments are flags the binary has, with valid values.
	o := app.NewOptions()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse(c.Args), "args %q", c.Args)
	assert.NoError(t, o.Validate())
	assert.Equal(t, m.roles[0].Namespace, o.LeaseNamespace, "the Role is in the lease's namespace")
	assert.Equal(t, ":8080", o.MetricsBindAddress)
	assert.Equal(t, ":8081", o.HealthProbeBindAddress)
	assert.Greater(t, *pod.TerminationGracePeriodSeconds, int64(o.ShutdownGracePeriod/time.Second),
		"the kubelet must not kill the pod before the shutdown grace period is over")
}

// grant is a policy rule and where it applies ("" is every namespace).
type grant struct {
	namespace string
	rule      rbacv1.PolicyRule
}

func grants(m manifests) []grant {
	var g []grant
	for _, r := range m.clusterRoles {
		for _, rule := range r.Rules {
			g = append(g, grant{"", rule})
		}
	}
	for _, r := range m.roles {
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
// fallback deletes it with --use-eviction-api), cancellations, repeated
// events, shutdown. It returns the controller's calls (not the test's).
func controllerActions(t *testing.T, o app.Options) []clienttesting.Action {
	var actions []clienttesting.Action
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		node := taintedNode("node-1", t0)
		client := newFakeAPI(node,
			boundPod("web", "uid-web", "node-1", t0, nil),
			boundPod("api", "uid-api", "node-1", t0, nil),
			boundPod("db", "uid-db", "node-1", t0, ptr.To(time.Hour)))
		refuseEvictions(client, func(_, name string) bool { return name == "api" })
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
		// Cancelled twice: the second, identical event is a patch.
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

// The manifests' RBAC allows every call the controller makes, and every
// verb it grants is one the controller uses: by default, or with
// --use-eviction-api (whose fallback deletes). (The integration tests
// prove the same against a real API server.)
func TestDeployRBACIsSufficientAndMinimal(t *testing.T) {
	m := readManifests(t)
	g := grants(m)
	used := make([]map[string]bool, len(g))
	for i := range used {
		used[i] = map[string]bool{}
	}
	evictionAPI := leaderOptions("replica-a")
	evictionAPI.UseEvictionAPI = true
	evictionAPI.EvictionFallbackAfter = time.Minute
	for _, o := range []app.Options{leaderOptions("replica-a"), evictionAPI} {
		for _, a := range controllerActions(t, o) {
			i := allowedBy(g, a)
			if !assert.GreaterOrEqual(t, i, 0, "forbidden (eviction API %v): %s %s/%s in %q",
				o.UseEvictionAPI, a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), a.GetNamespace()) {
				continue
			}
			used[i][a.GetVerb()] = true
		}
	}
	for i, gr := range g {
		for _, verb := range gr.rule.Verbs {
			assert.True(t, used[i][verb], "granted but never used: %s %v in %q", verb, gr.rule.Resources, gr.namespace)
		}
	}
}
