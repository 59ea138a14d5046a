package testenv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// StartWitness starts a second kube-apiserver on the same etcd, with the
// same flags on a port of its own and an audit log of its own
// (witness-audit.log), and returns an administrator's config for it once it
// is ready. [Env.KillAPIServer] leaves it running, so a watch through it
// sees every change across the first server's restarts: a test's oracle
// watches through it, as an observer behind another replica of a highly
// available control plane would. [Env.Stop] stops it. It may be started
// once.
func (e *Env) StartWitness(ctx context.Context) (*rest.Config, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.witness != nil {
		return nil, fmt.Errorf("testenv: StartWitness: already started")
	}
	for attempt := 1; ; attempt++ {
		cfg, p, err := e.startWitness(ctx)
		if err == nil {
			e.witness = p
			return cfg, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return nil, err
		}
	}
}

func (e *Env) startWitness(ctx context.Context) (*rest.Config, *process, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, nil, err
	}
	args := make([]string, 0, len(e.apiserverArgs))
	for _, a := range e.apiserverArgs {
		switch {
		case strings.HasPrefix(a, "--secure-port="):
			a = "--secure-port=" + strconv.Itoa(ports[0])
		case strings.HasPrefix(a, "--audit-log-path="):
			a = "--audit-log-path=" + filepath.Join(e.dir, "witness-audit.log")
		}
		args = append(args, a)
	}
	p, err := startProcess("kube-apiserver (witness)", e.apiserverBin, args, filepath.Join(e.dir, "kube-apiserver-witness.log"))
	if err != nil {
		return nil, nil, err
	}
	cfg := rest.CopyConfig(e.admin)
	cfg.Host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
	c, err := kubernetes.NewForConfig(cfg)
	if err == nil {
		err = p.waitReady(ctx, func(ctx context.Context) error {
			if err := c.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
				return fmt.Errorf("/readyz: %w", err)
			}
			_, err := c.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s not there yet", metav1.NamespaceSystem)
			}
			return err
		})
	}
	if err != nil {
		_ = p.stop(stopGrace)
		return nil, nil, err
	}
	return cfg, p, nil
}
