// Command upstream-taint-eviction runs Kubernetes' own taint-eviction
// controller (k8s.io/kubernetes pkg/controller/tainteviction, v1.37.2) alone,
// wired as kube-controller-manager wires it, so that examples/controller's
// scale harness can measure it beside taintkit-noexecute against the same
// API server:
//
//   - shared informers from a client of their own ("shared-informers"),
//     with kube-controller-manager's transform, which drops managedFields,
//     and its resync period (12 h at least: nothing resyncs in a run);
//   - the pod informer indexed by spec.nodeName, as kube-controller-manager's
//     node lifecycle controller indexes it (controller.AddPodNodeNameIndexer);
//   - the controller on the client kube-controller-manager gives it
//     ("node-controller"), which its event broadcaster shares;
//   - --kube-api-qps and --kube-api-burst on each client, as
//     kube-controller-manager applies them to each, and its default
//     content type, protobuf.
//
// --trim=unread caches pods as examples/controller/podcache.Trim keeps them instead (more
// than this controller reads: it reads names, node names and tolerations),
// so that its memory can be compared with taintkit-noexecute's on the same
// footing. Inside kube-controller-manager the pod informer is shared with
// other controllers, which read the rest of the pod: there, no such
// transform is possible.
//
// It logs "Caches are synced" (klog) when its informers have synced, and
// serves kube-controller-manager's legacy Prometheus registry (the
// controller's metrics, go_goroutines, process_*) on --metrics-bind-address.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/tainteviction"

	"github.com/taintkit/taintkit/examples/controller/podcache"
)

// minResyncPeriod is kube-controller-manager's default --min-resync-period;
// it resyncs each informer after a random period between it and twice it.
const minResyncPeriod = 12 * time.Hour

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (required)")
	qps := flag.Float64("kube-api-qps", 20, "requests per second to the API server, per client (kube-controller-manager's default)")
	burst := flag.Int("kube-api-burst", 30, "burst above --kube-api-qps, per client (kube-controller-manager's default)")
	trim := flag.String("trim", "managedfields", "the pod informer's transform: managedfields (kube-controller-manager's) or unread (podcache.Trim)")
	metricsAddr := flag.String("metrics-bind-address", "", "serve /metrics here; empty disables it")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, float32(*qps), *burst, *trim, *metricsAddr); err != nil {
		klog.ErrorS(err, "upstream-taint-eviction failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, kubeconfig string, qps float32, burst int, trim, metricsAddr string) error {
	if kubeconfig == "" {
		return errors.New("upstream-taint-eviction: --kubeconfig is required")
	}
	transform, err := transformFor(trim)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("upstream-taint-eviction: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	// kube-controller-manager's --kube-api-content-type default.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	informerClient, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "shared-informers"))
	if err != nil {
		return err
	}
	controllerClient, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "node-controller"))
	if err != nil {
		return err
	}

	ctx = klog.NewContext(ctx, klog.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(informerClient, minResyncPeriod, informers.WithTransform(transform))
	pods, nodes := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	if err := controller.AddPodNodeNameIndexer(pods.Informer()); err != nil {
		return fmt.Errorf("upstream-taint-eviction: add pod index: %w", err)
	}
	tec, err := tainteviction.New(ctx, controllerClient, pods, nodes, "taint-eviction-controller")
	if err != nil {
		return fmt.Errorf("upstream-taint-eviction: %w", err)
	}
	if metricsAddr != "" {
		l, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return fmt.Errorf("upstream-taint-eviction: metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", legacyregistry.Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tec.Run(ctx)
	}()
	<-ctx.Done()
	<-done
	factory.Shutdown()
	return nil
}

// transformFor returns the pod informer's transform for --trim.
func transformFor(trim string) (func(any) (any, error), error) {
	switch trim {
	case "managedfields":
		return stripManagedFields, nil
	case "unread":
		return func(obj any) (any, error) {
			if pod, ok := obj.(*v1.Pod); ok {
				return podcache.Trim(pod), nil
			}
			return stripManagedFields(obj)
		}, nil
	default:
		return nil, fmt.Errorf("upstream-taint-eviction: --trim must be managedfields or unread, got %q", trim)
	}
}

// stripManagedFields is what kube-controller-manager's transform does to
// every object its shared informers cache.
func stripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil && acc.GetManagedFields() != nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}
