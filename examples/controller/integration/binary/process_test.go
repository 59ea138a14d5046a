package binary_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controller is one process of the controller binary. Its stderr (klog)
// and stdout go to files in the test's temporary directory, printed when
// the test fails; its stderr is also read for what the test needs to know:
// the bound addresses and the leader election identity.
type controller struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	logs string // path of the stderr file

	serving chan struct{} // closed once both servers' addresses are logged
	started chan struct{} // closed once it is also synced (and waits for the lease)
	exited  chan struct{} // closed once the process has exited and its output is read
	code    int           // exit code, -1 if killed by a signal; valid after exited

	token string // the env's scrapeToken, for the metrics server

	mu                      sync.Mutex
	metricsAddr, healthAddr string
	identity                string
	waiting, synced, raced  bool
}

var (
	servingLine = regexp.MustCompile(`"Serving".* server="([^"]+)" address="([^"]+)"`)
	waitingLine = regexp.MustCompile(`"Waiting for the lease".* identity="([^"]+)"`)
)

// startController starts the binary as [launchController] does and returns
// once its informers are synced (with leader election: once it waits for
// the lease, and its identity is known).
func startController(t *testing.T, e *env, name string, args ...string) *controller {
	t.Helper()
	p := launchController(t, e, name, args...)
	select {
	case <-p.started:
	case <-p.exited:
		t.Fatalf("%s exited with code %d before it started", name, p.code)
	case <-e.ctx.Done():
		t.Fatalf("%s: not started: %v", name, e.ctx.Err())
	}
	return p
}

// launchController starts the binary with the test's kubeconfig and args,
// and returns once its servers listen. Both bind 127.0.0.1:0 and the test
// learns the ports from the "Serving" log lines: no window in which
// another process can take a port chosen in advance. Cleanup stops it
// with SIGTERM if it still runs, and fails the test if the race detector
// reported anything.
func launchController(t *testing.T, e *env, name string, args ...string) *controller {
	t.Helper()
	dir := t.TempDir()
	p := &controller{
		t:       t,
		name:    name,
		token:   e.scrapeToken,
		logs:    filepath.Join(dir, name+".stderr"),
		serving: make(chan struct{}),
		started: make(chan struct{}),
		exited:  make(chan struct{}),
	}
	all := append([]string{
		"--kubeconfig=" + e.kubeconfig,
		"--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--shutdown-grace-period=5s",
	}, args...)
	p.cmd = exec.Command(controllerBin, all...)
	stdout, err := os.Create(filepath.Join(dir, name+".stdout"))
	require.NoError(t, err)
	p.cmd.Stdout = stdout
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	logFile, err := os.Create(p.logs)
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Logf("%s: started pid %d: %s %s", name, p.cmd.Process.Pid, filepath.Base(controllerBin), strings.Join(all, " "))

	leaderElect := !slices.Contains(args, "--leader-elect=false")
	go func() {
		defer close(p.exited)
		p.scan(stderr, logFile, leaderElect)
		logFile.Close()
		err := p.cmd.Wait()
		stdout.Close()
		p.code = p.cmd.ProcessState.ExitCode()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Errorf("%s: wait: %v", name, err)
		}
	}()
	t.Cleanup(p.cleanup)

	select {
	case <-p.serving:
	case <-p.exited:
		t.Fatalf("%s exited with code %d before its servers listened", name, p.code)
	case <-e.ctx.Done():
		t.Fatalf("%s: servers not listening: %v", name, e.ctx.Err())
	}
	return p
}

// scan copies the process's stderr to w line by line and picks out what
// the test needs from the log lines.
func (p *controller) scan(r io.Reader, w io.Writer, leaderElect bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	serving, started := false, false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		p.mu.Lock()
		if m := servingLine.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "metrics":
				p.metricsAddr = m[2]
			case "health probe":
				p.healthAddr = m[2]
			}
		}
		if m := waitingLine.FindStringSubmatch(line); m != nil {
			p.identity, p.waiting = m[1], true
		}
		if strings.Contains(line, `"Informer caches synced"`) {
			p.synced = true
		}
		if strings.Contains(line, "WARNING: DATA RACE") {
			p.raced = true
		}
		if !serving && p.metricsAddr != "" && p.healthAddr != "" {
			close(p.serving)
			serving = true
		}
		if !started && serving && p.synced && (p.waiting || !leaderElect) {
			close(p.started)
			started = true
		}
		p.mu.Unlock()
	}
	// Ignore a read error: the process has gone, and Wait reports how.
	_, _ = io.Copy(w, r)
}

func (p *controller) metricsURL() string { return "https://" + p.metricsAddr + "/metrics" }
func (p *controller) healthURL(path string) string {
	return "http://" + p.healthAddr + path
}

// Identity is the replica's name in the Lease.
func (p *controller) Identity() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.identity
}

func (p *controller) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig and returns when it was sent.
func (p *controller) signal(sig syscall.Signal) time.Time {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig), "%s: signal %v", p.name, sig)
	return time.Now()
}

// wait waits for the process to exit and returns its exit code (-1 when a
// signal killed it).
func (p *controller) wait(ctx context.Context) int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-ctx.Done():
		p.t.Fatalf("%s has not exited: %v", p.name, ctx.Err())
		return 0
	}
}

// stopTimeout bounds a SIGTERM shutdown in cleanup: the 5 s grace period
// and the lease's release, with room for a loaded machine.
const stopTimeout = 20 * time.Second

func (p *controller) cleanup() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			p.t.Errorf("%s did not exit %v after SIGTERM: killed", p.name, stopTimeout)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	p.mu.Lock()
	raced := p.raced
	p.mu.Unlock()
	assert.False(p.t, raced, "%s: the race detector reported a data race (see its log)", p.name)
	if p.t.Failed() {
		p.dump()
	}
}

// dumpLines is how much of a process's log a failed test prints.
const dumpLines = 150

func (p *controller) dump() {
	for _, path := range []string{p.logs, strings.TrimSuffix(p.logs, ".stderr") + ".stdout"} {
		data, err := os.ReadFile(path)
		if err != nil {
			p.t.Logf("%s: %v", p.name, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		from := max(0, len(lines)-dumpLines)
		p.t.Logf("--- %s: %s, lines %d-%d of %d:\n%s", p.name, filepath.Base(path), from+1, len(lines), len(lines),
			strings.Join(lines[from:], "\n"))
	}
}
