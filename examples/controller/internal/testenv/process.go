package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is etcd or the kube-apiserver, running with its output in a file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait has returned
	waitErr error         // cmd.Wait's result; read after exited is closed
}

// errPortInUse marks a start-up that failed because another process took a
// port between our choosing it and the server binding it.
var errPortInUse = errors.New("address already in use")

// pollInterval is how often start-up probes the servers; they offer nothing to
// watch before they serve.
const pollInterval = 50 * time.Millisecond

// startProcess starts path with args, its output appended to logPath (a
// server started again after a kill goes on in the same file).
func startProcess(name, path string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// Not exec.CommandContext: the server outlives the context of Start.
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("testenv: starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// waitReady calls probe until it succeeds, the process exits, or ctx ends.
func (p *process) waitReady(ctx context.Context, probe func(context.Context) error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			tail := p.tail(20)
			msg := fmt.Sprintf("testenv: %s exited before it was ready (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tail)
			if strings.Contains(tail, errPortInUse.Error()) {
				return fmt.Errorf("%s: %w", msg, errPortInUse)
			}
			return errors.New(msg)
		case <-ctx.Done():
			return fmt.Errorf("testenv: %s not ready (last probe: %v): %w; last lines of %s:\n%s", p.name, err, ctx.Err(), p.logPath, p.tail(20))
		case <-ticker.C:
		}
	}
}

// stop asks the process to exit, kills it after grace, and waits for it.
// A process that has exited on its own by then is an error: it died under
// the tests.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return fmt.Errorf("testenv: %s had exited by itself (%v); see %s", p.name, p.waitErr, p.logPath)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	data = bytes.TrimRight(data, "\n")
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
