// Command footprint prints the Markdown table of hack/footprint.sh from
// what it measured: the binaries' sizes in DIR/bin, and the start-up rows
// of each DIR/NODES-PODS/results.csv written by hack/scale.
//
// Usage: go run ./hack/footprint DIR
package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// columns are the controllers, in the table's order; a column is shown if
// it was measured.
var columns = []struct{ name, bin string }{
	{"taintkit", "taintkit-noexecute"},
	{"taintkit-before", "taintkit-before"},
	{"upstream", "upstream-taint-eviction"},
	{"upstream-trimmed", "upstream-taint-eviction"},
}

// measured is results.csv's values by controller, run and metric.
type measured map[[3]string]float64

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: footprint DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

type size struct {
	nodes, pods int
	m           measured
	load        string
}

func run(dir string) error {
	results, err := filepath.Glob(filepath.Join(dir, "*-*", "results.csv"))
	if err != nil {
		return err
	}
	var sizes []size
	for _, path := range results {
		s, err := read(path)
		if err != nil {
			return err
		}
		sizes = append(sizes, s)
	}
	if len(sizes) == 0 {
		return fmt.Errorf("no results.csv under %s", dir)
	}
	slices.SortFunc(sizes, func(a, b size) int { return a.pods - b.pods })

	var shown []int
	for i, c := range columns {
		for _, s := range sizes {
			if _, ok := s.m[[3]string{c.name, "round-1", "startup_synced_rss_mib"}]; ok {
				shown = append(shown, i)
				break
			}
		}
	}
	header := "| |"
	rule := "|---|"
	for _, i := range shown {
		header += " " + columns[i].name + " |"
		rule += "---:|"
	}
	fmt.Println(header)
	fmt.Println(rule)
	row := func(label string, cell func(i int) string) {
		line := "| " + label + " |"
		for _, i := range shown {
			line += " " + cell(i) + " |"
		}
		fmt.Println(line)
	}
	row("binary (go build)", func(i int) string {
		fi, err := os.Stat(filepath.Join(dir, "bin", columns[i].bin))
		if err != nil {
			return "–"
		}
		return fmt.Sprintf("%.1f MB", float64(fi.Size())/1e6)
	})
	value := func(s size, name, run, metric, format string) string {
		v, ok := s.m[[3]string{name, run, metric}]
		if !ok {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	first := sizes[0]
	row("no pods: RSS synced / after a minute", func(i int) string {
		n := columns[i].name
		if n == "upstream-trimmed" {
			n = "upstream" // the same process with no pods
		}
		return value(first, n, "no-pods", "startup_synced_rss_mib", "%.0f") + " / " +
			value(first, n, "no-pods-steady", "steady_rss_mib", "%.0f MiB")
	})
	for _, s := range sizes {
		label := fmt.Sprintf("%s pods / %s nodes", thousands(s.pods), thousands(s.nodes))
		row(label+": RSS synced / after a minute", func(i int) string {
			n := columns[i].name
			return value(s, n, "round-1", "startup_synced_rss_mib", "%.0f") + " / " + value(s, n, "steady", "steady_rss_mib", "%.0f MiB")
		})
		row(label+": start-up CPU until idle", func(i int) string {
			return value(s, columns[i].name, "round-1", "startup_idle_cpu_seconds", "%.2f s")
		})
	}
	for _, s := range sizes {
		fmt.Printf("\n%s pods: %s\n", thousands(s.pods), s.load)
	}
	return nil
}

func read(path string) (size, error) {
	f, err := os.Open(path)
	if err != nil {
		return size{}, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return size{}, fmt.Errorf("%s: %w", path, err)
	}
	s := size{m: measured{}}
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[3], 64)
		if err != nil {
			return size{}, fmt.Errorf("%s: %q: %w", path, r[3], err)
		}
		s.m[[3]string{r[0], r[1], r[2]}] = v
		s.nodes, _ = strconv.Atoi(r[5])
		s.pods, _ = strconv.Atoi(r[6])
	}
	if summary, err := os.ReadFile(filepath.Join(filepath.Dir(path), "summary.txt")); err == nil {
		first, _, _ := strings.Cut(string(summary), "\n")
		if _, load, ok := strings.Cut(first, "load average "); ok {
			s.load = "load average " + load + " at the start"
		}
	}
	return s, nil
}

// thousands writes n with commas: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
