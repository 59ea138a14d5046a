package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/taintkit/taintkit/examples/controller/app"
)

func main() {
	os.Exit(run())
}

// run returns the exit code: 0 after a clean shutdown, 1 on an error
// (lease lost included), 2 for bad flags.
func run() int {
	o := app.NewOptions()
	o.AddFlags(flag.CommandLine) // exits 2 on a parse error, as flag does
	flag.Parse()
	defer klog.Flush()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %q\n", flag.Args())
		return 2
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "invalid flags:\n%v\n", err)
		return 2
	}
	cfg, err := app.RESTConfig(o.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := klog.Background().WithName(app.Component)
	ctx = klog.NewContext(ctx, logger)
	switch err := app.Run(ctx, cfg, o); {
	case err == nil:
		logger.Info("Stopped")
		return 0
	case errors.Is(err, app.ErrLeaderLost):
		logger.Error(err, "Exiting: a restart starts a fresh manager")
		return 1
	default:
		logger.Error(err, "Exiting")
		return 1
	}
}
