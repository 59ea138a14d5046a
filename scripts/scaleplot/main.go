// Command scaleplot draws the scale harness's deletions.csv (hack/scale) as a
// PNG: for each controller, the tainted pods deleted so far against the
// seconds since the taint's TimeAdded, and the pods due so far. It is in the
// scripts module, so that the plotting library stays out of the examples'.
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func main() {
	in := flag.String("in", "deletions.csv", "the harness's deletions.csv")
	out := flag.String("out", "deletions.png", "the PNG to write")
	title := flag.String("title", "", "the plot's title (default: the number of pods)")
	flag.Parse()
	if err := run(*in, *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in, out, title string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return fmt.Errorf("scaleplot: %s: %w", in, err)
	}
	if len(rows) < 2 {
		return fmt.Errorf("scaleplot: %s holds no deletions", in)
	}
	// controller, pod, toleration_s, deadline_s, deleted_s, late_s; times
	// in seconds since the harness tainted the nodes. Each run's taint has
	// its own TimeAdded (whole seconds, up to 1 s before the taint): the
	// plot counts from it, so that the deadlines of all runs line up.
	deleted := map[string][]float64{}
	deadlines := map[string][]float64{}
	var order []string
	for _, row := range rows[1:] {
		c := row[0]
		if _, ok := deadlines[c]; !ok {
			order = append(order, c)
		}
		tol, err1 := strconv.ParseFloat(row[2], 64)
		d, err2 := strconv.ParseFloat(row[3], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("scaleplot: toleration %q, deadline %q: not numbers", row[2], row[3])
		}
		added := d - tol // the taint's TimeAdded
		deadlines[c] = append(deadlines[c], tol)
		if row[4] != "" {
			t, err := strconv.ParseFloat(row[4], 64)
			if err != nil {
				return fmt.Errorf("scaleplot: deleted %q: %w", row[4], err)
			}
			deleted[c] = append(deleted[c], t-added)
		}
	}
	p := plot.New()
	if title == "" {
		title = fmt.Sprintf("Zone outage: %d pods on tainted nodes", len(deadlines[order[0]]))
	}
	p.Title.Text = title
	p.X.Label.Text = "seconds since the taint's TimeAdded"
	p.Y.Label.Text = "pods deleted"
	p.Legend.Top, p.Legend.Left = false, false
	var lines []any
	lines = append(lines, "due (deadline passed)", cumulative(deadlines[order[0]]))
	for _, c := range order {
		lines = append(lines, c, cumulative(deleted[c]))
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, out)
}

// cumulative returns the step curve of how many of times have passed.
func cumulative(times []float64) plotter.XYs {
	times = slices.Clone(times)
	slices.Sort(times)
	pts := make(plotter.XYs, 0, 2*len(times)+1)
	pts = append(pts, plotter.XY{X: 0, Y: 0})
	for i, t := range times {
		pts = append(pts, plotter.XY{X: t, Y: float64(i)}, plotter.XY{X: t, Y: float64(i + 1)})
	}
	return pts
}
