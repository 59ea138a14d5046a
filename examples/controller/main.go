package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/taintkit/taintkit/examples/controller/app"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit code: 0 after a clean shutdown (or --help,
// --version), 1 on an error (lease lost included), 2 for bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	o := app.NewOptions()
	fss := o.Flags()
	var showVersion bool
	fss.FlagSet(app.FlagsGeneric).BoolVar(&showVersion, "version", false,
		"Print the version and build information, and exit.")
	fs := pflag.NewFlagSet(app.Component, pflag.ContinueOnError)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	fs.SetOutput(io.Discard) // errors and usage are printed below
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage:\n  %s [flags]\n", app.Component)
		cliflag.PrintSections(w, fss, 0)
	}
	switch err := fs.Parse(args); {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprintf(stdout, "%s evicts pods from nodes with NoExecute taints they do not tolerate.\n\n", app.Component)
		usage(stdout)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "%v\nRun %s --help for the flags.\n", err, app.Component)
		return 2
	}
	defer klog.Flush()
	if showVersion {
		fmt.Fprint(stdout, app.VersionInfo())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		return 2
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "invalid flags:\n%v\n", err)
		return 2
	}
	cfg, err := app.RESTConfig(o.Kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, err)
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
