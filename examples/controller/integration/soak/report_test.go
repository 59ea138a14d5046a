package soak_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
)

// result is what a soak did and measured.
type result struct {
	cfg         soakConfig
	begin       time.Time
	ops         opCounts
	standErr    error
	faults      []faultRecord
	samples     []sample
	report      *oracle.Report
	replicas    []replicaSummary
	standWrites int
	claimed     int // pods created with a device claim
}

type replicaSummary struct {
	name  string
	runs  int
	exits []replicaExit
}

// leakMeasures are the survivor's measures the leak check compares.
var leakMeasures = []struct {
	name string
	f    func(sample) float64
}{
	{"RSS (MiB)", func(s sample) float64 { return float64(s.rss) / (1 << 20) }},
	{"goroutines", func(s sample) float64 { return float64(s.goroutines) }},
	{"open file descriptors", func(s sample) float64 { return float64(s.fds) }},
}

// String is the report, in Markdown (the README quotes it).
func (r result) String() string {
	var b strings.Builder
	api := "DELETE"
	if r.cfg.evictionAPI {
		api = "the Eviction API (--use-eviction-api, --eviction-fallback-after=30s)"
	}
	replicas := "three replicas (two killed in turn, the survivor a standby)"
	if r.cfg.replicas == 1 {
		replicas = "one replica (the survivor, leading throughout)"
	}
	fmt.Fprintf(&b, "Soak of %v, seed %d: %d pods on %d nodes, %s, evictions through %s. Replay: `%s`.\n\n",
		r.cfg.duration, r.cfg.seed, r.cfg.pods, r.cfg.nodes, replicas, api, r.cfg.replay())

	b.WriteString("| operation | applied | raced (object gone or replaced meanwhile) | failed in a fault | failed otherwise |\n|---|---:|---:|---:|---:|\n")
	sum := [4]int{}
	for _, op := range r.ops.ops() {
		row := [4]int{r.ops.applied[op], r.ops.raced[op], r.ops.inFaults[op], r.ops.failed[op]}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", op, row[0], row[1], row[2], row[3])
		for i := range row {
			sum[i] += row[i]
		}
	}
	fmt.Fprintf(&b, "| **all** | **%d** | %d | %d | %d |\n\n", sum[0], sum[1], sum[2], sum[3])
	for _, op := range r.ops.ops() {
		if e := r.ops.lastErr[op]; e != "" {
			fmt.Fprintf(&b, "- last failure of %s outside the faults: %s\n", op, e)
		}
	}
	fmt.Fprintf(&b, "- disruption budget status writes by the stand-in: %d", r.standWrites)
	if r.standErr != nil {
		fmt.Fprintf(&b, " (its last failed one: %v)", r.standErr)
	}
	b.WriteString("\n\n")

	rep := r.report
	var all, calm []time.Duration
	refused, faulted := 0, 0
	for _, e := range rep.Evictions {
		all = append(all, e.Late())
		switch {
		case e.Refused > 0:
			refused++
		case e.Fault != "":
			faulted++
		default:
			calm = append(calm, e.Late())
		}
	}
	fmt.Fprintf(&b, "Oracle: **%d invariant violations**; %d pods evicted by the controller (%d after a budget refused them, %d due during a fault); its pod writes %v; %d held by a budget (429) at their bound",
		len(rep.Violations), len(rep.Evictions), refused, faulted, rep.Writes, len(rep.Held))
	if len(rep.Excused) > 0 {
		fmt.Fprintf(&b, "; %d given up (excused)", len(rep.Excused))
	}
	b.WriteString(".\n\n")
	dev, rule := deviceEvictions(rep)
	fmt.Fprintf(&b, "Devices: %d pods created with a claim of a device; %d pods evicted for a device's taint (%d of them a DeviceTaintRule's); rule status writes %d; the guard held a rule %d times (limit %d).\n\n",
		r.claimed, dev, rule, rep.Writes[oracle.RuleStatus], len(rep.HeldRules), ruleMaxPods)
	b.WriteString("Deletion after the pod was due (its deadline, or when the state that made it due was seen):\n\n")
	b.WriteString("| evictions | n | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n")
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{{"all", all}, {"neither refused by a budget nor due during a fault", calm}} {
		if n := len(row.d); n > 0 {
			slices.Sort(row.d)
			fmt.Fprintf(&b, "| %s | %d | %v | %v | %v |\n", row.name, n, ms(row.d[n/2]), ms(row.d[n*99/100]), ms(row.d[n-1]))
		}
	}
	b.WriteString("\n")

	b.WriteString("| fault | at | recovered in | |\n|---|---:|---:|---|\n")
	rec := map[string][]time.Duration{}
	for _, f := range r.faults {
		fmt.Fprintf(&b, "| %s | %v | %v | %s |\n", f.kind, f.at.Sub(r.begin).Round(time.Second), ms(f.recovered), f.detail)
		if f.recovered > 0 {
			rec[f.kind] = append(rec[f.kind], f.recovered)
		}
	}
	b.WriteString("\n")
	for _, kind := range slices.Sorted(func(yield func(string) bool) {
		for k := range rec {
			if !yield(k) {
				return
			}
		}
	}) {
		d := rec[kind]
		slices.Sort(d)
		fmt.Fprintf(&b, "- %s: %d, recovery (to a leader writing the Lease again) min %v, median %v, max %v\n",
			kind, len(d), ms(d[0]), ms(d[len(d)/2]), ms(d[len(d)-1]))
	}
	for _, rs := range r.replicas {
		fmt.Fprintf(&b, "- replica %s: %d runs", rs.name, rs.runs)
		for _, e := range rs.exits {
			fmt.Fprintf(&b, "; %s %s at %v", e.identity, e.state, e.at.Sub(r.begin).Round(time.Second))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")

	if len(r.samples) > 0 {
		b.WriteString("The survivor (never killed), sampled every 10 s; the mean of each stretch:\n\n| measure |")
		from := leakBaseline(r.cfg.duration)
		points := []time.Duration{from, r.cfg.duration - leakWindow}
		for _, p := range points {
			fmt.Fprintf(&b, " %v–%v |", p.Round(time.Second), (p + leakWindow).Round(time.Second))
		}
		b.WriteString(" growth |\n|---|---:|---:|---:|\n")
		for _, m := range append(leakMeasures, struct {
			name string
			f    func(sample) float64
		}{"pods (population)", func(s sample) float64 { return float64(s.pods) }}) {
			base, last, ok := growth(r.samples, from, r.cfg.duration, leakWindow, m.f)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %+.1f%% |\n", m.name, base, last, (last/base-1)*100)
		}
	}
	return b.String()
}

// deviceEvictions counts the evictions for a device's taint, and those of
// them for a DeviceTaintRule's.
func deviceEvictions(rep *oracle.Report) (device, rule int) {
	for _, e := range rep.Evictions {
		d, r := isDeviceTaint(e.Taint)
		if d {
			device++
		}
		if r {
			rule++
		}
	}
	return device, rule
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// leakBaseline is when the leak comparison's first end is taken: at 5
// minutes, or half-way through a shorter soak (whose figures are shown but
// not checked).
func leakBaseline(d time.Duration) time.Duration { return min(leakFrom, d/2) }
