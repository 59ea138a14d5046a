package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report writes results.csv, deletions.csv and summary.txt in the output
// directory as the runs go, so that an interrupted run keeps what it
// measured.
type report struct {
	results, deletions *csv.Writer
	files              []*os.File
	summary            *os.File
	nodes, pods        string
}

func newReport(cfg config) (*report, error) {
	r := &report{nodes: strconv.Itoa(cfg.nodes), pods: strconv.Itoa(cfg.pods)}
	open := func(name string) (*os.File, error) {
		f, err := os.Create(filepath.Join(cfg.out, name))
		if err == nil {
			r.files = append(r.files, f)
		}
		return f, err
	}
	f, err := open("results.csv")
	if err != nil {
		return nil, err
	}
	r.results = csv.NewWriter(f)
	_ = r.results.Write([]string{"controller", "run", "metric", "value", "unit", "nodes", "pods",
		"apiserver_cpu_s", "apiserver_rss_mib", "etcd_cpu_s", "etcd_rss_mib"})
	if f, err = open("deletions.csv"); err != nil {
		return nil, err
	}
	r.deletions = csv.NewWriter(f)
	_ = r.deletions.Write([]string{"controller", "pod", "toleration_s", "deadline_s", "deleted_s", "late_s"})
	if r.summary, err = open("summary.txt"); err != nil {
		return nil, err
	}
	r.logf("scale: %d nodes, %d pods, --kube-api-qps=%d --kube-api-burst=%d, load average %s", cfg.nodes, cfg.pods, cfg.qps, cfg.burst, loadAverage())
	return r, nil
}

func (r *report) add(controller, run, metric string, value float64, unit string, s servers) {
	_ = r.results.Write([]string{controller, run, metric, strconv.FormatFloat(value, 'f', 4, 64), unit,
		r.nodes, r.pods,
		fmt.Sprintf("%.1f", s.APIServer.CPU.Seconds()), fmt.Sprintf("%.0f", mib(s.APIServer.RSS)),
		fmt.Sprintf("%.1f", s.Etcd.CPU.Seconds()), fmt.Sprintf("%.0f", mib(s.Etcd.RSS))})
	r.results.Flush()
}

func (r *report) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, line)
	fmt.Fprintln(r.summary, line)
}

// outage records an outage's figures and deletions.
func (r *report) outage(k kind, cl *cluster, out *outage, cfg config) {
	s := out.summarise()
	srv := out.ServersEnd
	run := "outage"
	add := func(metric string, v float64, unit string) { r.add(k.name, run, metric, v, unit, srv) }
	add("outage_tainted_nodes", float64(out.TaintedNodes), "")
	add("outage_tainted_pods", float64(out.TaintedPods), "")
	add("outage_zero_half_gone_seconds", s.ZeroGone.Seconds(), "s")
	add("outage_all_gone_seconds", s.AllGone.Seconds(), "s")
	add("outage_missing_pods", float64(s.Missing), "")
	add("outage_late_p50_seconds", s.LateP50.Seconds(), "s")
	add("outage_late_p99_seconds", s.LateP99.Seconds(), "s")
	add("outage_late_max_seconds", s.LateMax.Seconds(), "s")
	add("outage_early_pods", float64(s.Early), "")
	add("outage_out_of_deadline_order_pods", float64(s.OutOfOrder), "")
	add("outage_cpu_seconds", (out.After.CPU - out.Before.CPU).Seconds(), "s")
	add("outage_peak_rss_mib", mib(out.After.Peak), "MiB")
	add("outage_rss_before_mib", mib(out.Before.RSS), "MiB")
	add("outage_peak_goroutines", float64(out.PeakGoroutines), "")
	add("outage_apiserver_cpu_seconds", (srv.APIServer.CPU - out.ServersBefore.APIServer.CPU).Seconds(), "s")
	add("outage_etcd_cpu_seconds", (srv.Etcd.CPU - out.ServersBefore.Etcd.CPU).Seconds(), "s")
	client := "taintkit-noexecute"
	if k.upstream {
		client = "upstream-taint-eviction/node-controller"
	}
	max10 := out.maxPerWindow(client, 10*time.Second)
	add("outage_max_evictions_started_per_10s", float64(max10), "")
	add("outage_oracle_violations", float64(len(out.Violations)), "")

	var clients []string
	for c := range out.Requests {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	var lines []string
	for _, c := range clients {
		total := 0
		var whats []string
		for what, n := range out.Requests[c] {
			total += n
			whats = append(whats, fmt.Sprintf("%s %d", what, n))
			r.add(k.name, run, "requests "+c+" "+what, float64(n), "", srv)
		}
		slices.Sort(whats)
		perPod := float64(total) / float64(out.TaintedPods)
		podOnly := 0
		for what, n := range out.Requests[c] {
			if strings.HasSuffix(what, " pods") || strings.Contains(what, " pods/") {
				podOnly += n
			}
		}
		r.add(k.name, run, "requests_per_pod "+c, perPod, "", srv)
		r.add(k.name, run, "pod_requests_per_pod "+c, float64(podOnly)/float64(out.TaintedPods), "", srv)
		lines = append(lines, fmt.Sprintf("    %s: %.2f a pod, %.2f of them to pods (%s)", c, perPod, float64(podOnly)/float64(out.TaintedPods), strings.Join(whats, ", ")))
	}
	r.logf("%s outage: %d nodes, %d pods tainted; 0 s half gone %.1f s, all gone %.1f s, missing %d; past deadline p50 %.1f s, p99 %.1f s, max %.1f s; early %d; out of deadline order %d; most evictions started in 10 s: %d; peak RSS %.0f MiB, peak goroutines %d; CPU %.1f s (API server %.1f s, etcd %.1f s); oracle violations %d",
		k.name, out.TaintedNodes, out.TaintedPods, s.ZeroGone.Seconds(), s.AllGone.Seconds(), s.Missing,
		s.LateP50.Seconds(), s.LateP99.Seconds(), s.LateMax.Seconds(), s.Early, s.OutOfOrder, max10,
		mib(out.After.Peak), out.PeakGoroutines, (out.After.CPU - out.Before.CPU).Seconds(),
		(srv.APIServer.CPU - out.ServersBefore.APIServer.CPU).Seconds(), (srv.Etcd.CPU - out.ServersBefore.Etcd.CPU).Seconds(), len(out.Violations))
	r.logf("  requests from the taint to %v after the last deletion, by client:\n%s", cfg.settle, strings.Join(lines, "\n"))
	for i, v := range out.Violations {
		if i == 20 {
			r.logf("  … %d more violations", len(out.Violations)-20)
			break
		}
		r.logf("  oracle: %s", v)
	}
	for _, d := range out.Deletions {
		deleted, late := "", ""
		if !d.Deleted.IsZero() {
			deleted = fmt.Sprintf("%.3f", d.Deleted.Sub(out.Tainted).Seconds())
			late = fmt.Sprintf("%.3f", d.Deleted.Sub(d.Deadline).Seconds())
		}
		_ = r.deletions.Write([]string{k.name, d.Pod, fmt.Sprintf("%.0f", d.Toleration.Seconds()),
			fmt.Sprintf("%.3f", d.Deadline.Sub(out.Tainted).Seconds()), deleted, late})
	}
	r.deletions.Flush()
}

func (r *report) close() {
	r.results.Flush()
	r.deletions.Flush()
	for _, f := range r.files {
		_ = f.Close()
	}
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
