package testenv_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// A controller started as a process with --kubeconfig runs as the
// ServiceAccount the kubeconfig impersonates.
func TestWriteKubeconfigImpersonates(t *testing.T) {
	env, _, ctx := setup(t, "")
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, testenv.WriteKubeconfig(path, env.ImpersonatedConfig("kube-system", "taintkit")))

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:kube-system:taintkit", review.Status.UserInfo.Username)
	assert.ElementsMatch(t, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
		review.Status.UserInfo.Groups)
}

// The deploy manifests' kinds apply, namespace first whatever the file order,
// and applying them again succeeds.
func TestApplyManifests(t *testing.T) {
	env, c, ctx := setup(t, "")

	for range 2 {
		objs, err := env.ApplyManifests(ctx, "testdata/deploy")
		require.NoError(t, err)
		var kinds []string
		for _, o := range objs {
			kinds = append(kinds, o.GetKind())
		}
		assert.Equal(t, []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"}, kinds)
	}
	_, err := c.CoreV1().ServiceAccounts("apply").Get(ctx, "controller", metav1.GetOptions{})
	assert.NoError(t, err)
	_, err = c.RbacV1().ClusterRoleBindings().Get(ctx, "apply-controller", metav1.GetOptions{})
	assert.NoError(t, err)
	_, err = c.RbacV1().RoleBindings("apply").Get(ctx, "controller-leases", metav1.GetOptions{})
	assert.NoError(t, err)
	d, err := c.AppsV1().Deployments("apply").Get(ctx, "controller", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), *d.Spec.Replicas)
}

func TestApplyManifestsRejectsBadInput(t *testing.T) {
	env := testenv.Shared(t)
	dir := t.TempDir()
	noName := filepath.Join(dir, "noname.yaml")
	require.NoError(t, os.WriteFile(noName, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o600))
	unknown := filepath.Join(dir, "unknown.yaml")
	require.NoError(t, os.WriteFile(unknown, []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"), 0o600))

	for _, path := range []string{noName, unknown, filepath.Join(dir, "missing.yaml"), t.TempDir()} {
		_, err := env.ApplyManifests(t.Context(), path)
		assert.Error(t, err, path)
	}
}

// Events count whichever API recorded them, and whether they came before or
// after the wait began.
func TestWaitForEvent(t *testing.T) {
	_, c, ctx := setup(t, "events")
	pod, err := c.CoreV1().Pods("events").Create(ctx, testenv.NewPod("events", "p"), metav1.CreateOptions{})
	require.NoError(t, err)
	ref := corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"}

	_, err = c.EventsV1().Events("events").Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "events", GenerateName: "before-"},
		EventTime:           metav1.NowMicro(),
		Regarding:           ref,
		Reason:              "TaintManagerEviction",
		Note:                "Marking for deletion Pod events/p",
		Type:                corev1.EventTypeNormal,
		Action:              "Delete",
		ReportingController: "taintkit.example.com/test",
		ReportingInstance:   "test",
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := testenv.WaitForEvent(ctx, c, "events", "TaintManagerEviction", pod.UID)
	require.NoError(t, err)
	assert.Equal(t, "Marking for deletion Pod events/p", got.Message)

	type result struct {
		e   *corev1.Event
		err error
	}
	waited := make(chan result, 1)
	go func() {
		e, err := testenv.WaitForEvent(ctx, c, "events", "Cancelled", "")
		waited <- result{e, err}
	}()
	_, err = c.CoreV1().Events("events").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "events", GenerateName: "after-"},
		InvolvedObject: ref,
		Reason:         "Cancelled",
		Message:        "Cancelling deletion Pod events/p",
		Type:           corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	r := <-waited
	require.NoError(t, r.err)
	assert.Equal(t, "Cancelling deletion Pod events/p", r.e.Message)
}

// The waits end with the context's error when the awaited state never comes.
func TestWaitsEndWithContext(t *testing.T) {
	_, c, _ := setup(t, "timeouts")
	pod, err := c.CoreV1().Pods("timeouts").Create(t.Context(), testenv.NewPod("timeouts", "stays"), metav1.CreateOptions{})
	require.NoError(t, err)
	// Long enough for the list and watch to start, so the deadline ends a
	// running watch, not the start.
	const wait = 500 * time.Millisecond

	waits := map[string]func(context.Context) error{
		"WaitForPodDeleted": func(ctx context.Context) error {
			_, err := testenv.WaitForPodDeleted(ctx, c, "timeouts", "stays", pod.UID)
			return err
		},
		"WaitForPod": func(ctx context.Context) error {
			_, err := testenv.WaitForPod(ctx, c, "timeouts", "stays", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
			return err
		},
		"WaitForEvent": func(ctx context.Context) error {
			_, err := testenv.WaitForEvent(ctx, c, "timeouts", "Never", "")
			return err
		},
	}
	for name, waitFor := range waits {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			assert.ErrorIs(t, waitFor(ctx), context.DeadlineExceeded)
		})
	}
}

// A pod deleted before it satisfies the condition ends the wait with
// ErrPodDeleted rather than a timeout.
func TestWaitForPodReportsDeletion(t *testing.T) {
	_, c, ctx := setup(t, "gone")
	pod, err := c.CoreV1().Pods("gone").Create(ctx, testenv.NewPod("gone", "p"), metav1.CreateOptions{})
	require.NoError(t, err)

	seen := make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		var once sync.Once
		_, err := testenv.WaitForPod(ctx, c, "gone", "p", func(p *corev1.Pod) bool {
			once.Do(func() { close(seen) }) // the wait has the pod
			return p.Status.Phase == corev1.PodRunning
		})
		waited <- err
	}()
	<-seen
	require.NoError(t, c.CoreV1().Pods("gone").Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	assert.ErrorIs(t, <-waited, testenv.ErrPodDeleted)
}

func TestStartReportsMissingBinary(t *testing.T) {
	_, err := testenv.Start(t.Context(), testenv.Options{KubeAPIServer: filepath.Join(t.TempDir(), "kube-apiserver")})
	var missing *testenv.MissingBinaryError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, "kube-apiserver", missing.Name)
	assert.Contains(t, err.Error(), testenv.BuildCommand)
}

// The binary the tests look for is the one the build script makes.
func TestKubernetesVersionMatchesBuildModule(t *testing.T) {
	gomod, err := os.ReadFile("../../../../bench/upstream/go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(gomod)
	require.NotNil(t, m, "no k8s.io/kubernetes requirement in bench/upstream/go.mod")
	assert.Equal(t, testenv.KubernetesVersion, string(m[1]))
}
