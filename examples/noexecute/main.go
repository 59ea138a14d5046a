// Command noexecute runs a NoExecute taint manager built from taintkit's
// packages on an in-memory cluster.
//
// With no flags it plays a scripted scenario on a fake clock and prints a
// timeline with offsets from t0; the output is the same on every run:
//
//	go -C examples run ./noexecute
//
// -real plays the same scenario on real timers, sped up by -scale (0.01
// turns 300 s into 3 s). -nodes N -pods-per-node M instead taints N nodes
// carrying M untolerating pods each, all at once, and reports how long the
// evictions took, with peak goroutines and heap; then it replays the same
// cluster writes without a manager and reports the manager's own heap.
//
// The manager itself is in the manager sub-package, the cluster model in the
// cluster sub-package.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/utils/clock"
)

func main() {
	real := flag.Bool("real", false, "play the scenario on real timers, sped up by -scale")
	scale := flag.Float64("scale", 0.01, "with -real: wall-clock seconds per scenario second")
	nodes := flag.Int("nodes", 0, "scale run: taint this many nodes at once (0: play the scenario)")
	podsPerNode := flag.Int("pods-per-node", 100, "scale run: untolerating pods per node")
	verbosity := flag.Int("v", -1, "log the manager at this verbosity to stderr (-1: no logs)")
	flag.Parse()

	log := logger(*verbosity)
	var err error
	switch {
	case *nodes > 0:
		err = runScale(os.Stdout, *nodes, *podsPerNode, log)
	case *real:
		if *scale <= 0 {
			err = fmt.Errorf("noexecute: -scale must be positive, got %v", *scale)
			break
		}
		err = runScenario(os.Stdout, func() clock.Clock { return newScaledClock(t0, *scale) }, log)
	default:
		err = runScenario(os.Stdout, nil, log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// t0 is where the scenario's clock starts.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// logger returns a logger writing to stderr at verbosity v, or
// logr.Discard() for v < 0 (a given logger is used as is, so it silences).
func logger(v int) logr.Logger {
	if v < 0 {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{Verbosity: v})
}

// waitIdle waits for the manager to finish what is due, or fails after a
// generous wall-clock minute (a bug, not a slow machine).
func waitIdle(w interface{ WaitIdle(context.Context) error }) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WaitIdle(ctx); err != nil {
		return fmt.Errorf("noexecute: waiting for the manager: %w", err)
	}
	return nil
}
