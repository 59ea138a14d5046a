package timedqueue

import (
	"fmt"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultMaxConcurrency is the default of [WithMaxConcurrency].
const DefaultMaxConcurrency = 32

// maxSlots bounds MaxConcurrency so that counts fit comfortably in an int32.
const maxSlots = 1 << 20

// Option configures a [TimedWorkerQueue].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// options are a queue's settings, set by New, then only read.
type options struct {
	clock              clock.Clock
	max                int
	retry              RetryPolicy
	log                logr.Logger
	metrics            MetricsProvider
	name               string
	timeout            time.Duration
	failure, retryHook any // FailureFunc[K] and RetryFunc[K], checked by New
}

// WithClock sets the queue's clock. The default is clock.RealClock{}.
func WithClock(c clock.Clock) Option { return optionFunc(func(o *options) { o.clock = c }) }

// WithMaxConcurrency bounds the work funcs running at once, withdrawn ones
// included, to n in [1, 1<<20]. The default is DefaultMaxConcurrency.
func WithMaxConcurrency(n int) Option { return optionFunc(func(o *options) { o.max = n }) }

// WithRetry sets how failed attempts are retried.
func WithRetry(p RetryPolicy) Option { return optionFunc(func(o *options) { o.retry = p }) }

// WithLogger sets the logger. The default is klog.Background().
func WithLogger(l logr.Logger) Option { return optionFunc(func(o *options) { o.log = l }) }

// WithMetricsProvider sets the queue's metrics. The default records nothing.
func WithMetricsProvider(p MetricsProvider) Option {
	return optionFunc(func(o *options) { o.metrics = p })
}

// WithName names the queue in its log lines and to the MetricsProvider.
func WithName(name string) Option { return optionFunc(func(o *options) { o.name = name }) }

// WithAttemptTimeout cancels each attempt's ctx d after it started, with
// Cause context.DeadlineExceeded; the work func must return on its own. Zero,
// the default, means no timeout.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.timeout = d })
}

// WithFailureHook sets the failure hook; New checks f's key type.
//
// Deprecated: use [TimedWorkerQueue.SetFailureHook], which the compiler checks.
func WithFailureHook[K comparable](f FailureFunc[K]) Option {
	return optionFunc(func(o *options) { o.failure = f })
}

// WithRetryHook sets the retry hook; New checks f's key type.
//
// Deprecated: use [TimedWorkerQueue.SetRetryHook], which the compiler checks.
func WithRetryHook[K comparable](f RetryFunc[K]) Option {
	return optionFunc(func(o *options) { o.retryHook = f })
}

func buildOptions[K comparable](opts []Option) (o options, h hooks[K], err error) {
	o = options{clock: clock.RealClock{}, max: DefaultMaxConcurrency, metrics: noopProvider{}, log: klog.Background()}
	for _, opt := range opts {
		if opt == nil {
			return o, h, fmt.Errorf("timedqueue: nil Option")
		}
		opt.apply(&o)
	}
	var ok bool
	switch {
	case o.clock == nil:
		return o, h, fmt.Errorf("timedqueue: WithClock: clock must not be nil")
	case o.max < 1:
		return o, h, fmt.Errorf("timedqueue: MaxConcurrency must be at least 1, got %d", o.max)
	case o.max > maxSlots:
		return o, h, fmt.Errorf("timedqueue: MaxConcurrency must be at most %d, got %d", maxSlots, o.max)
	case o.timeout < 0:
		return o, h, fmt.Errorf("timedqueue: AttemptTimeout must not be negative, got %v", o.timeout)
	case o.metrics == nil:
		return o, h, fmt.Errorf("timedqueue: WithMetricsProvider: provider must not be nil")
	}
	if h.failure, ok = o.failure.(FailureFunc[K]); o.failure != nil && !ok {
		return o, h, fmt.Errorf("timedqueue: WithFailureHook: hook type %T does not match the queue's key type %v", o.failure, reflect.TypeFor[K]())
	}
	if h.retry, ok = o.retryHook.(RetryFunc[K]); o.retryHook != nil && !ok {
		return o, h, fmt.Errorf("timedqueue: WithRetryHook: hook type %T does not match the queue's key type %v", o.retryHook, reflect.TypeFor[K]())
	}
	if o.retry, err = o.retry.normalize(); err != nil {
		return o, h, err
	}
	if o.name != "" {
		o.log = o.log.WithValues("queue", o.name)
	}
	return o, h, nil
}
