package testenv

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// Host returns the API server's address, 127.0.0.1:port: where a proxy
// between a controller and the server connects. Its serving certificate is
// valid for 127.0.0.1, so a client may reach it through a proxy that listens
// on 127.0.0.1 and keep verifying it.
func (e *Env) Host() string { return e.host }

// KillAPIServer kills the API server with SIGKILL, as a crash or an OOM kill
// would, and returns once it has exited. etcd keeps running, and with it
// every object. [Env.StartAPIServer] starts it again.
func (e *Env) KillAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.apiserver
	select {
	case <-p.exited:
		return fmt.Errorf("testenv: KillAPIServer: the kube-apiserver is not running (%v); see %s", p.waitErr, p.logPath)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("testenv: KillAPIServer: %w", err)
	}
	<-p.exited
	return nil
}

// StartAPIServer starts the API server again after [Env.KillAPIServer], with
// the same flags on the same port and the same etcd, its log and audit log
// appended to, and returns once it is ready, or ctx ends. A failed start
// leaves it stopped; call StartAPIServer again.
func (e *Env) StartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	old := e.apiserver
	select {
	case <-old.exited:
	default:
		e.mu.Unlock()
		return errors.New("testenv: StartAPIServer: the kube-apiserver is running")
	}
	p, err := startProcess("kube-apiserver", e.apiserverBin, e.apiserverArgs, e.apiserverLog())
	if err != nil {
		e.mu.Unlock()
		return err
	}
	e.apiserver = p
	e.mu.Unlock()
	if err := p.waitReady(ctx, e.ready); err != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return err
	}
	return nil
}
