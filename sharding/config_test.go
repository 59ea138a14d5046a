package sharding_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/taintkit/taintkit/sharding"
)

func TestNewRejectsInvalidConfig(t *testing.T) {
	valid := newEnv().config
	tests := []struct {
		name   string
		modify func(*sharding.Config[string, string])
		want   string
	}{
		{"nil HandleHigh", func(c *sharding.Config[string, string]) { c.HandleHigh = nil }, "sharding: HandleHigh must not be nil"},
		{"nil HandleLow", func(c *sharding.Config[string, string]) { c.HandleLow = nil }, "sharding: HandleLow must not be nil"},
		{"nil HighKey", func(c *sharding.Config[string, string]) { c.HighKey = nil }, "sharding: HighKey must not be nil"},
		{"nil LowKey", func(c *sharding.Config[string, string]) { c.LowKey = nil }, "sharding: LowKey must not be nil"},
		{"negative Shards", func(c *sharding.Config[string, string]) { c.Shards = -1 }, "sharding: Shards must not be negative, got -1"},
		{"negative MaxHighBurst", func(c *sharding.Config[string, string]) { c.MaxHighBurst = -2 }, "sharding: MaxHighBurst must not be negative, got -2"},
		{"negative MaxAttempts", func(c *sharding.Config[string, string]) { c.Retry.MaxAttempts = -2 },
			"sharding: Retry.MaxAttempts must not be negative but for UnlimitedAttempts (-1), got -2"},
		{"negative InitialBackoff", func(c *sharding.Config[string, string]) { c.Retry.InitialBackoff = -time.Second },
			"sharding: Retry.InitialBackoff must not be negative, got -1s"},
		{"negative MaxBackoff", func(c *sharding.Config[string, string]) { c.Retry.MaxBackoff = -time.Second },
			"sharding: Retry.MaxBackoff must not be negative, got -1s"},
		{"MaxBackoff below InitialBackoff", func(c *sharding.Config[string, string]) {
			c.Retry = sharding.RetryPolicy{InitialBackoff: 2 * time.Second, MaxBackoff: time.Second}
		}, "sharding: Retry.MaxBackoff (1s) must not be less than Retry.InitialBackoff (2s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.modify(&cfg)
			d, err := sharding.New(cfg)
			assert.Nil(t, d)
			assert.EqualError(t, err, tc.want)
		})
	}

	t.Run("zero optional fields", func(t *testing.T) {
		d, err := sharding.New(sharding.Config[string, string]{
			HighKey: keyOf, LowKey: keyOf,
			HandleHigh: func(context.Context, string) error { return nil },
			HandleLow:  func(context.Context, string) error { return nil },
		})
		require.NoError(t, err)
		assert.Equal(t, 0, d.Len())
	})
}

// Rule: New returns an error, never panics, for a Shards above MaxShards: a
// huge value must neither panic in make nor truncate to zero shards.
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

// countingSink is a logr.LogSink that counts the lines it is given.
type countingSink struct{ n *atomic.Int32 }

func (countingSink) Init(logr.RuntimeInfo)            {}
func (countingSink) Enabled(int) bool                 { return true }
func (s countingSink) Info(int, string, ...any)       { s.n.Add(1) }
func (s countingSink) Error(error, string, ...any)    { s.n.Add(1) }
func (s countingSink) WithValues(...any) logr.LogSink { return s }
func (s countingSink) WithName(string) logr.LogSink   { return s }

// Rule (Config.Logger): a nil Logger means klog.Background(); a
// given logger is used as is, so logr.Discard() silences the dispatcher.
func TestLoggerNilMeansKlogGivenUsedAsIs(t *testing.T) {
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
	runTwice := func(logger *logr.Logger) {
		buf.Reset()
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
	runTwice(nil)
	assert.Contains(t, buf.String(), "Run called more than once", "nil Logger: klog.Background()")

	discard := logr.Discard() // as Config.Logger's doc says to silence a dispatcher
	runTwice(&discard)
	assert.Empty(t, buf.String(), "logr.Discard() wrote to klog")

	var n atomic.Int32
	counting := logr.New(countingSink{&n})
	runTwice(&counting)
	assert.Empty(t, buf.String(), "a given logger wrote to klog")
	assert.Equal(t, int32(1), n.Load(), "the given logger did not get the error")
}
