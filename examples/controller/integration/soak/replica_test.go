package soak_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// restartDelay is how long the supervisor waits before it starts a killed
// replica again (a kubelet restarts a container at once the first time).
const restartDelay = time.Second

// replica is one replica of the controller binary under a supervisor that
// starts it again each time it exits, with a new identity (the binary makes
// one per process), until stop. Each run's stderr goes to a file of its own.
type replica struct {
	name string
	bin  string
	args []string
	dir  string

	mu       sync.Mutex
	run      int
	cmd      *exec.Cmd
	identity string               // the current run's, once it waits for the lease
	since    time.Time            // when the current run started; zero between runs
	starts   map[string]time.Time // every run's start, by identity
	metrics  string               // host:port of the current run's metrics server
	exits    []replicaExit
	started  chan struct{} // closed once the current run waits for the lease
	stopping bool
	done     chan struct{} // closed when the supervisor has returned
}

// replicaExit is a run that ended.
type replicaExit struct {
	identity string
	at       time.Time
	state    string // "exit status 1", "signal: killed", …
}

// errStopping is start's refusal once stop has begun.
var errStopping = errors.New("stopping")

var (
	servingLine = regexp.MustCompile(`"Serving".* server="([^"]+)" address="([^"]+)"`)
	waitingLine = regexp.MustCompile(`"Waiting for the lease".* identity="([^"]+)"`)
)

// startReplica starts the supervisor and returns once the first run waits
// for the lease, or ctx ends.
func startReplica(ctx context.Context, name, bin, dir string, args ...string) (*replica, error) {
	r := &replica{name: name, bin: bin, args: args, dir: dir, starts: map[string]time.Time{}, done: make(chan struct{})}
	first, err := r.start()
	if err != nil {
		return nil, err
	}
	go r.supervise(first)
	select {
	case <-r.currentStarted():
		return r, nil
	case <-ctx.Done():
		r.stop(5 * time.Second)
		return nil, fmt.Errorf("%s: not waiting for the lease: %w", name, ctx.Err())
	}
}

// start starts one run and returns a channel closed when it has exited.
func (r *replica) start() (<-chan error, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return nil, errStopping
	}
	r.run++
	r.identity, r.metrics = "", ""
	r.started = make(chan struct{})
	logFile, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", r.name, r.run)))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.bin, r.args...)
	cmd.SysProcAttr = sysProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	cmd.Stdout = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	r.cmd, r.since = cmd, time.Now()
	exited := make(chan error, 1)
	started := r.started
	go func() {
		r.scan(stderr, logFile, started)
		logFile.Close()
		exited <- cmd.Wait()
	}()
	return exited, nil
}

// scan copies the run's stderr to w and picks out its metrics address and
// its identity.
func (r *replica) scan(rd io.Reader, w io.Writer, started chan struct{}) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	closed := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		if closed {
			continue
		}
		r.mu.Lock()
		if m := servingLine.FindStringSubmatch(line); m != nil && m[1] == "metrics" {
			r.metrics = m[2]
		}
		if m := waitingLine.FindStringSubmatch(line); m != nil {
			r.identity = m[1]
			r.starts[m[1]] = r.since
		}
		if r.metrics != "" && r.identity != "" {
			close(started)
			closed = true
		}
		r.mu.Unlock()
	}
	_, _ = io.Copy(w, rd)
}

// supervise waits for each run to exit and starts the next, until stop.
func (r *replica) supervise(exited <-chan error) {
	defer close(r.done)
	for {
		err := <-exited
		r.mu.Lock()
		state := "exit status 0"
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			state = ee.ProcessState.String()
		}
		r.exits = append(r.exits, replicaExit{identity: r.identity, at: time.Now(), state: state})
		r.since = time.Time{}
		stopping := r.stopping
		r.mu.Unlock()
		if stopping {
			return
		}
		time.Sleep(restartDelay)
		var startErr error
		if exited, startErr = r.start(); errors.Is(startErr, errStopping) {
			return
		} else if startErr != nil {
			r.mu.Lock()
			r.exits = append(r.exits, replicaExit{at: time.Now(), state: "not started: " + startErr.Error()})
			r.mu.Unlock()
			return
		}
	}
}

// Starts returns when each run started, by identity.
func (r *replica) Starts() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.starts)
}

// Since returns when the current run started, or the zero time between
// runs.
func (r *replica) Since() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.since
}

func (r *replica) currentStarted() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// Identity is the current run's identity ("" until it waits for the lease).
func (r *replica) Identity() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.identity
}

// Pid is the current run's process ID.
func (r *replica) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process.Pid
}

// MetricsAddr is the current run's metrics server, host:port.
func (r *replica) MetricsAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metrics
}

// Runs is how many runs the supervisor started.
func (r *replica) Runs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.run
}

// Exits are the runs that ended.
func (r *replica) Exits() []replicaExit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]replicaExit(nil), r.exits...)
}

// kill sends SIGKILL to the current run, as an OOM kill or a node's loss
// would end it, and returns when.
func (r *replica) kill() (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return time.Time{}, fmt.Errorf("%s: SIGKILL: %w", r.name, err)
	}
	return time.Now(), nil
}

// stop ends the supervisor: SIGTERM to the current run, SIGKILL after
// grace. It reports whether the run exited within grace.
func (r *replica) stop(grace time.Duration) bool {
	r.mu.Lock()
	r.stopping = true
	cmd := r.cmd
	r.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
		return true
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-r.done
		return false
	}
}
