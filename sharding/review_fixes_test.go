package sharding_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/taintkit/taintkit/sharding"
)

// Rule: New returns an error, never panics, for a Shards above MaxShards
// (a huge value used to panic in make or truncate to zero shards).
func TestNewRejectsTooManyShards(t *testing.T) {
	for _, n := range []int{sharding.MaxShards + 1, 1 << 32, 1e9, math.MaxInt} {
		cfg := newEnv().config()
		cfg.Shards = n
		var d *sharding.Dispatcher[string, string]
		var err error
		require.NotPanics(t, func() { d, err = sharding.New(cfg) }, "Shards=%d", n)
		assert.Nil(t, d)
		assert.EqualError(t, err, "sharding: Shards must be at most 65536, got "+itoa(n))
	}
	cfg := newEnv().config()
	cfg.Shards = sharding.MaxShards
	d, err := sharding.New(cfg)
	require.NoError(t, err)
	assert.Equal(t, 0, d.Len())
}

func itoa(n int) string { return fmt.Sprint(n) }

// Rule (Config.Logger): the zero Logger, which logr.Discard() also is, logs
// through klog; a funcr logger with a no-op func, as the field documents,
// silences the dispatcher.
func TestLoggerDocumentedSilencing(t *testing.T) {
	var buf bytes.Buffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	require.NoError(t, fs.Set("logtostderr", "false"))
	require.NoError(t, fs.Set("alsologtostderr", "false"))
	require.NoError(t, fs.Set("stderrthreshold", "FATAL"))
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.SetOutput(nil)
		_ = fs.Set("logtostderr", "true")
		_ = fs.Set("stderrthreshold", "ERROR")
	})

	// The second Run logs an error: see where it goes.
	runTwice := func(logger logr.Logger) {
		cfg := newEnv().config()
		cfg.Logger = logger
		d, err := sharding.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d.Run(ctx)
		d.Run(ctx)
		klog.Flush()
	}
	for _, l := range []logr.Logger{{}, logr.Discard()} {
		buf.Reset()
		runTwice(l)
		assert.Contains(t, buf.String(), "Run called more than once", "zero Logger: klog.Background()")
	}
	buf.Reset()
	runTwice(funcr.New(func(_, _ string) {}, funcr.Options{}))
	assert.Empty(t, buf.String(), "the documented silent logger wrote to klog")
}
