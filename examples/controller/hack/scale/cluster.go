package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

const (
	namespace = "scale"
	// The identities the controllers act as: ours with deploy/'s RBAC,
	// upstream's with cluster-admin (kube-controller-manager's
	// node-controller role, which it uses, allows more than it needs too).
	oursSA, upstreamSA = "taintkit-noexecute", "upstream-taint-eviction"
)

// The limits a large control plane raises (kubeadm and the scalability
// tests' clusters set these orders of magnitude).
var (
	apiserverFlags = []string{
		"--max-requests-inflight=3000",
		"--max-mutating-requests-inflight=1000",
	}
	etcdFlags = []string{"--quota-backend-bytes=8589934592"} // 8 GiB, etcd's recommended maximum
)

// cluster is one etcd and API server holding the nodes and pods of a run.
type cluster struct {
	env          *testenv.Env
	dir          string
	c            kubernetes.Interface
	ourConfig    string // kubeconfig files
	upstreamConf string
	nodes, pods  int
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }
func podName(i int) string  { return fmt.Sprintf("pod-%06d", i) }

// startCluster starts a cluster in dir (emptied first) with the identities
// and namespace the runs need, and no nodes or pods.
func startCluster(ctx context.Context, dir, deployDir string) (*cluster, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	env, err := testenv.Start(sctx, testenv.Options{
		APIServerFlags: apiserverFlags,
		EtcdFlags:      etcdFlags,
		AuditReads:     true,
		Dir:            dir,
	})
	if err != nil {
		return nil, err
	}
	cl := &cluster{env: env, dir: dir, c: env.Client()}
	if err := cl.setUp(sctx, deployDir); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return cl, nil
}

func (cl *cluster) setUp(ctx context.Context, deployDir string) error {
	if _, err := cl.env.ApplyManifests(ctx, filepath.Join(deployDir, "serviceaccount.yaml"), filepath.Join(deployDir, "rbac.yaml")); err != nil {
		return err
	}
	_, err := cl.c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: upstreamSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: upstreamSA}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := cl.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for sa, file := range map[string]*string{oursSA: &cl.ourConfig, upstreamSA: &cl.upstreamConf} {
		cfg := cl.env.ImpersonatedConfig(metav1.NamespaceSystem, sa)
		for _, attrs := range []authorizationv1.ResourceAttributes{
			{Verb: "watch", Resource: "pods"},
			{Verb: "delete", Resource: "pods", Namespace: namespace},
			{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: namespace},
		} {
			if err := testenv.WaitForAccess(ctx, cfg, attrs); err != nil {
				return err
			}
		}
		*file = filepath.Join(cl.dir, sa+".kubeconfig")
		if err := testenv.WriteKubeconfig(*file, cfg); err != nil {
			return err
		}
	}
	return nil
}

// populate creates nodes and pods in parallel: pod i on node i mod nodes,
// bound by spec.nodeName, in slot i / nodes of it; its unreachable
// toleration 0 s in even slots, long in odd ones; a PodScheduled condition
// (a status write) in slots 0, 1, 4, 5, …, so that each half of the
// tolerations has half of its pods with a bound time, on every node.
func (cl *cluster) populate(ctx context.Context, nodes, pods, workers int, long time.Duration) error {
	cl.nodes, cl.pods = nodes, pods
	if err := parallel(ctx, nodes, workers, func(ctx context.Context, i int) error {
		_, err := testenv.CreateNode(ctx, cl.c, nodeName(i))
		return err
	}); err != nil {
		return err
	}
	var done atomic.Int64
	start := time.Now()
	err := parallel(ctx, pods, workers, func(ctx context.Context, i int) error {
		pod, err := cl.c.CoreV1().Pods(namespace).Create(ctx, newPod(i, nodes, long), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if (i/nodes)%4 < 2 {
			now := metav1.NewTime(time.Now())
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
				Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now,
			})
			if _, err := cl.c.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if n := done.Add(1); n%10000 == 0 {
			fmt.Fprintf(os.Stderr, "scale: %d pods in %v\n", n, time.Since(start).Round(time.Second))
		}
		return nil
	})
	return err
}

// toleration returns the unreachable toleration of pod i of a cluster of
// nodes nodes.
func toleration(i, nodes int, long time.Duration) corev1.Toleration {
	secs := int64(0)
	if (i/nodes)%2 == 1 {
		secs = int64(long / time.Second)
	}
	return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}
}

// newPod is a pod as a Deployment's ReplicaSet makes one: labels,
// annotations, two containers with environment, resources and probes, an
// owner reference; about 4 KB of JSON as the API server stores it.
func newPod(i, nodes int, long time.Duration) *corev1.Pod {
	app := "app-" + strconv.Itoa(i%50)
	env := func(prefix string) []corev1.EnvVar {
		var vars []corev1.EnvVar
		for j := range 8 {
			vars = append(vars, corev1.EnvVar{Name: fmt.Sprintf("%s_SETTING_%d", prefix, j), Value: fmt.Sprintf("value-%d-of-the-%s-configuration", j, prefix)})
		}
		return append(vars, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	}
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 10, TimeoutSeconds: 2}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(i), Namespace: namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-prod",
				"app.kubernetes.io/version": "1.24.3", "app.kubernetes.io/component": "server",
				"pod-template-hash": "7d9f8c6b5",
			},
			Annotations: map[string]string{
				"prometheus.io/scrape":                           "true",
				"prometheus.io/port":                             "9090",
				"kubectl.kubernetes.io/restartedAt":              "2025-01-01T00:00:00Z",
				"example.com/config-checksum":                    "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef",
				"cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d9f8c6b5",
				UID: types.UID(fmt.Sprintf("4f6c2f8e-0d3c-4c1e-9a59-0c8a7f3e%04d", i%50)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:    nodeName(i % nodes),
			Tolerations: []corev1.Toleration{toleration(i, nodes, long)},
			Containers: []corev1.Container{
				{
					Name: "server", Image: "registry.example.com/" + app + "/server:1.24.3",
					Args:  []string{"--config=/etc/app/config.yaml", "--log-level=info"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
					Env:   env("SERVER"), Resources: res("250m", "256Mi"),
					ReadinessProbe: probe, LivenessProbe: probe,
				},
				{
					Name: "proxy", Image: "registry.example.com/mesh/proxy:1.19.0",
					Args: []string{"proxy", "sidecar", "--concurrency=2"},
					Env:  env("PROXY"), Resources: res("100m", "128Mi"),
				},
			},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
	}
}

// parallel calls f for 0..n-1 on workers goroutines and returns the first
// error.
func parallel(ctx context.Context, n, workers int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
