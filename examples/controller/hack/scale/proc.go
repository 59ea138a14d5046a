package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux the harness runs on.
const clockTicks = 100

// usage is a process's CPU time and memory as /proc shows them.
type usage struct {
	CPU  time.Duration // user + system, since the process started
	RSS  uint64        // resident set, bytes
	Peak uint64        // the resident set's high-water mark (VmHWM), bytes
}

// readUsage reads pid's usage from /proc.
func readUsage(pid int) (usage, error) {
	var u usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return u, fmt.Errorf("scale: /proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, _ := strconv.ParseUint(fields[11], 10, 64)
	stime, _ := strconv.ParseUint(fields[12], 10, 64)
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			u.RSS = kb << 10
		case "VmHWM":
			u.Peak = kb << 10
		}
	}
	return u, nil
}

// servers is the API server's and etcd's usage at one moment.
type servers struct {
	APIServer, Etcd usage
}

func readServers(apiserver, etcd int) servers {
	a, _ := readUsage(apiserver)
	e, _ := readUsage(etcd)
	return servers{APIServer: a, Etcd: e}
}

// controllerProc is a controller under measurement: a process of its own,
// its stderr in a file, watched for the line that says its caches synced.
type controllerProc struct {
	kind       string
	cmd        *exec.Cmd
	started    time.Time
	metricsURL string
	synced     chan struct{} // closed when the caches-synced line is logged
	syncedAt   time.Time     // read after synced is closed
	exited     chan struct{}
}

// startController starts bin with args plus a metrics address of its own;
// metricsFlag names the flag that takes it.
func startController(kind, bin, dir string, args []string, metricsFlag, syncedLine string) (*controllerProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logFile, err := os.Create(filepath.Join(dir, kind+".stderr"))
	if err != nil {
		return nil, err
	}
	p := &controllerProc{kind: kind, metricsURL: "http://" + addr + "/metrics", synced: make(chan struct{}), exited: make(chan struct{})}
	w := &lineWatcher{w: logFile, pattern: syncedLine, found: func() { p.syncedAt = time.Now(); close(p.synced) }}
	p.cmd = exec.Command(bin, append(args, metricsFlag+"="+addr)...)
	p.cmd.Stderr = w
	p.cmd.Stdout = logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the harness
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("scale: starting %s: %w", kind, err)
	}
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *controllerProc) usage() usage {
	u, _ := readUsage(p.cmd.Process.Pid)
	return u
}

// waitSynced waits for the caches-synced line.
func (p *controllerProc) waitSynced(ctx context.Context) error {
	select {
	case <-p.synced:
		return nil
	case <-p.exited:
		return fmt.Errorf("scale: %s exited before its caches synced (%v)", p.kind, p.cmd.ProcessState)
	case <-ctx.Done():
		return fmt.Errorf("scale: %s: caches not synced: %w", p.kind, ctx.Err())
	}
}

// waitIdle waits until the process has used less than 2 % of a core for 2 s
// on end: it has handled every object its informers delivered.
func (p *controllerProc) waitIdle(ctx context.Context) (time.Time, error) {
	const window, step = 2 * time.Second, 250 * time.Millisecond
	type sample struct {
		at  time.Time
		cpu time.Duration
	}
	var samples []sample
	ticker := time.NewTicker(step)
	defer ticker.Stop()
	for {
		now := time.Now()
		samples = append(samples, sample{now, p.usage().CPU})
		for len(samples) > 1 && now.Sub(samples[1].at) >= window {
			samples = samples[1:]
		}
		if first := samples[0]; now.Sub(first.at) >= window && samples[len(samples)-1].cpu-first.cpu <= window/50 {
			return first.at, nil
		}
		select {
		case <-p.exited:
			return time.Time{}, fmt.Errorf("scale: %s exited (%v)", p.kind, p.cmd.ProcessState)
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("scale: %s never idle: %w", p.kind, ctx.Err())
		case <-ticker.C:
		}
	}
}

// goroutines scrapes go_goroutines from the process's /metrics; -1 if it
// cannot.
func (p *controllerProc) goroutines(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int(n)
			}
		}
	}
	return -1
}

// stop sends SIGTERM, kills after grace, and waits.
func (p *controllerProc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// lineWatcher writes to w and calls found once, for the first line that
// holds pattern.
type lineWatcher struct {
	w       io.Writer
	pattern string
	found   func()
	mu      sync.Mutex
	partial []byte
	done    bool
}

func (l *lineWatcher) Write(b []byte) (int, error) {
	l.mu.Lock()
	if !l.done {
		l.partial = append(l.partial, b...)
		for {
			i := bytes.IndexByte(l.partial, '\n')
			if i < 0 {
				break
			}
			if bytes.Contains(l.partial[:i], []byte(l.pattern)) {
				l.done = true
				l.found()
				l.partial = nil
				break
			}
			l.partial = l.partial[i+1:]
		}
	}
	l.mu.Unlock()
	return l.w.Write(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
