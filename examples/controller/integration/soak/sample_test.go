package soak_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// sample is one reading of a process: resident memory and open file
// descriptors from /proc (the kernel's word), goroutines from its own
// /metrics.
type sample struct {
	at         time.Duration // since the soak began
	rss        int64         // bytes
	fds        int
	goroutines int
	pods       int // the population then
}

// sampler samples one process every sampleEvery.
type sampler struct {
	pid      int
	addr     func() string // its metrics server
	token    string
	newToken func() (string, error)
	begin    time.Time
	world    *world
	logf     func(string, ...any)

	samples []sample
	errs    []sampleErr
}

type sampleErr struct {
	at  time.Time
	err error
}

func (s *sampler) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(sampleEvery):
		}
		sm, err := s.sample(ctx)
		if err != nil {
			// Once more, 2 s later: a scrape is reviewed by the API server
			// (TokenReview, SubjectAccessReview), which may be restarting.
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			if sm, err = s.sample(ctx); err != nil {
				if ctx.Err() == nil {
					s.errs = append(s.errs, sampleErr{time.Now(), err})
				}
				continue
			}
		}
		s.samples = append(s.samples, sm)
		if len(s.samples)%30 == 0 {
			s.logf("soak: %v: %d pods; survivor RSS %.1f MiB, %d goroutines, %d fds", sm.at.Round(time.Second),
				sm.pods, float64(sm.rss)/(1<<20), sm.goroutines, sm.fds)
		}
	}
}

func (s *sampler) sample(ctx context.Context) (sample, error) {
	sm := sample{at: time.Since(s.begin), pods: s.world.livePods()}
	var err error
	if sm.rss, sm.fds, err = readProc(s.pid); err != nil {
		return sm, err
	}
	sm.goroutines, err = goroutines(ctx, s.addr(), s.token)
	if errors.Is(err, errUnauthorized) {
		tok, tokErr := s.newToken()
		if tokErr != nil {
			return sm, fmt.Errorf("%w; a new token: %w", err, tokErr)
		}
		s.token = tok
		sm.goroutines, err = goroutines(ctx, s.addr(), s.token)
	}
	return sm, err
}

// failures are the samples that failed twice while no fault was active.
func (s *sampler) failures(disturbed func(time.Time) bool) []string {
	var out []string
	for _, e := range s.errs {
		if !disturbed(e.at) {
			out = append(out, fmt.Sprintf("%v: %v", e.at.Sub(s.begin).Round(time.Second), e.err))
		}
	}
	return out
}

// readProc reads pid's resident set size and open file descriptors.
func readProc(pid int) (rss int64, fds int, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			rss = kb << 10
		}
	}
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	return rss, len(entries), sc.Err()
}

// scrapeClient does not verify the metrics server's certificate, which is
// self-signed.
var scrapeClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
}

// errUnauthorized is a scrape refused for its token (which expires).
var errUnauthorized = errors.New("401 Unauthorized")

// goroutines reads go_goroutines from the metrics server at addr.
func goroutines(ctx context.Context, addr, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return 0, errUnauthorized
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			return int(n), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/metrics: no go_goroutines")
}

// growth compares the mean of the samples in [from, from+window) with the
// mean of those in the window before end, for one measure; ok is false if
// either has none.
func growth(samples []sample, from, end, window time.Duration, measure func(sample) float64) (base, last float64, ok bool) {
	var b, l []float64
	for _, s := range samples {
		if s.at >= from && s.at < from+window {
			b = append(b, measure(s))
		}
		if s.at > end-window {
			l = append(l, measure(s))
		}
	}
	if len(b) == 0 || len(l) == 0 {
		return 0, 0, false
	}
	return mean(b), mean(l), true
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
