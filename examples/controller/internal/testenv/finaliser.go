package testenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
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
	// retries are the deletions being retried after the server was away.
	retries sync.WaitGroup

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
	err := deleteNow(ctx, c, pod)
	if unreachable(err) {
		// The server is away (restarted, say): a kubelet tries again until
		// it answers, and so does this, off the informer's goroutine.
		f.retries.Add(1)
		go func() {
			defer f.retries.Done()
			f.retry(ctx, c, pod)
		}()
		return
	}
	f.record(ctx, pod, err)
}

// retryInterval is how often a deletion is tried again while the server is
// away, and retryFor how long at most.
const (
	retryInterval = 200 * time.Millisecond
	retryFor      = 2 * time.Minute
)

func (f *PodFinaliser) retry(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) {
	giveUp := time.Now().Add(retryFor)
	for {
		var err error
		select {
		case <-ctx.Done():
		case <-time.After(retryInterval):
			err = deleteNow(ctx, c, pod)
		}
		if ctx.Err() != nil {
			// Stopped while the server was still away: the pod may be left
			// terminating, which the caller must hear of.
			err = fmt.Errorf("the server was still away at Stop: %w", context.Cause(ctx))
		} else if unreachable(err) && time.Now().Before(giveUp) {
			continue
		}
		f.fail(pod, err)
		return
	}
}

func deleteNow(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	zero := int64(0)
	return c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
}

// unreachable tells a failure of the server's absence (refused connection,
// a server shutting down or not yet serving) from an answer.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// record keeps the failure of a first attempt.
func (f *PodFinaliser) record(ctx context.Context, pod *corev1.Pod, err error) {
	// A deletion cut short by Stop is no failure: the server answered none.
	if ctx.Err() != nil {
		return
	}
	f.fail(pod, err)
}

// fail keeps err as the first failure, unless it is an outcome wanted (the
// pod gone, or replaced by one of the same name).
func (f *PodFinaliser) fail(pod *corev1.Pod, err error) {
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
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
	f.retries.Wait()
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
