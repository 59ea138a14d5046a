package testenv

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodFinaliser finishes pod deletions as the kubelet does once a pod's
// containers have stopped: it deletes every pod that has a deletionTimestamp
// with grace period 0, so the pod leaves the API server. Without it a deleted
// pod that is bound to a node stays, terminating, for ever. Its methods are
// safe for concurrent use by multiple goroutines. The zero value is not
// usable; call [StartPodFinaliser].
type PodFinaliser struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error // the first failed deletion
}

// StartPodFinaliser starts finishing the deletions of pods in namespace (all
// namespaces if it is empty) and returns once it has seen every existing pod,
// so a pod already terminating is among the first it deletes. Each deletion
// is conditional on the pod's UID, so a pod recreated under the same name is
// left alone. ctx bounds the start only; call Stop to stop it.
func StartPodFinaliser(ctx context.Context, c kubernetes.Interface, namespace string) (*PodFinaliser, error) {
	runCtx, cancel := context.WithCancel(context.Background())
	f := &PodFinaliser{cancel: cancel, done: make(chan struct{})}
	finish := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp == nil {
			return
		}
		f.delete(runCtx, c, pod)
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: podListWatch(c, namespace, ""),
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    finish,
			UpdateFunc: func(_, obj any) { finish(obj) },
		},
	})
	go func() {
		defer close(f.done)
		informer.RunWithContext(runCtx)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		_ = f.Stop()
		return nil, fmt.Errorf("testenv: StartPodFinaliser: listing pods: %w", context.Cause(ctx))
	}
	return f, nil
}

func (f *PodFinaliser) delete(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) {
	zero := int64(0)
	err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	// Gone already, or replaced by a pod of the same name (a UID conflict):
	// both are the outcome wanted. A deletion cut short by Stop is no failure.
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = fmt.Errorf("testenv: PodFinaliser: deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}

// Stop stops the finaliser and waits until it has. It returns the first
// deletion that failed, so a test that checks it knows no pod was left
// terminating by the finaliser's fault. Calls after the first return the same.
func (f *PodFinaliser) Stop() error {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// podListWatch lists and watches pods in namespace ("" for all), optionally
// only the one named name.
func podListWatch(c kubernetes.Interface, namespace, name string) cache.ListerWatcher {
	sel := func(o *metav1.ListOptions) {
		if name != "" {
			o.FieldSelector = "metadata.name=" + name
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel(&o)
			return c.CoreV1().Pods(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel(&o)
			return c.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	}
}
