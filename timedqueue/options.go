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

// Option configures a [TimedWorkerQueue].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	clock          clock.Clock
	clockSet       bool
	maxConcurrency int
	retry          RetryPolicy
	logger         logr.Logger
	loggerSet      bool
	metrics        MetricsProvider
	name           string
	attemptTimeout time.Duration
	failureHook    any // FailureFunc[K], checked by New
	retryHook      any // RetryFunc[K], checked by New
}

// WithClock sets the queue's clock. The default is clock.RealClock{}.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(o *options) { o.clock, o.clockSet = c, true })
}

// WithMaxConcurrency bounds the work funcs running at once, withdrawn ones
// included, to n in [1, 1<<20]. The default is DefaultMaxConcurrency.
func WithMaxConcurrency(n int) Option {
	return optionFunc(func(o *options) { o.maxConcurrency = n })
}

// WithRetry sets how failed attempts are retried.
func WithRetry(p RetryPolicy) Option {
	return optionFunc(func(o *options) { o.retry = p })
}

// WithLogger sets the logger. Without it the queue logs to klog.Background();
// a given logger, logr.Discard() included, is used as is.
func WithLogger(l logr.Logger) Option {
	return optionFunc(func(o *options) { o.logger, o.loggerSet = l, true })
}

// WithMetricsProvider sets the queue's metrics. The default records nothing.
func WithMetricsProvider(p MetricsProvider) Option {
	return optionFunc(func(o *options) { o.metrics = p })
}

// WithName names the queue in its log lines and to the MetricsProvider.
func WithName(name string) Option {
	return optionFunc(func(o *options) { o.name = name })
}

// WithAttemptTimeout cancels each attempt's ctx d after it started, with
// Cause context.DeadlineExceeded; the work func must return on its own. Zero,
// the default, means no timeout.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.attemptTimeout = d })
}

// WithFailureHook sets the failure hook; New checks f's key type.
//
// Deprecated: use [TimedWorkerQueue.SetFailureHook], which the compiler checks.
func WithFailureHook[K comparable](f FailureFunc[K]) Option {
	return optionFunc(func(o *options) { o.failureHook = f })
}

// WithRetryHook sets the retry hook; New checks f's key type.
//
// Deprecated: use [TimedWorkerQueue.SetRetryHook], which the compiler checks.
func WithRetryHook[K comparable](f RetryFunc[K]) Option {
	return optionFunc(func(o *options) { o.retryHook = f })
}

func buildOptions[K comparable](opts []Option) (options, hooks[K], error) {
	var h hooks[K]
	o := options{maxConcurrency: DefaultMaxConcurrency, metrics: noopProvider{}}
	for _, opt := range opts {
		if opt == nil {
			return o, h, fmt.Errorf("timedqueue: nil Option")
		}
		opt.apply(&o)
	}
	if !o.clockSet {
		o.clock = clock.RealClock{}
	} else if o.clock == nil {
		return o, h, fmt.Errorf("timedqueue: WithClock: clock must not be nil")
	}
	if o.maxConcurrency < 1 {
		return o, h, fmt.Errorf("timedqueue: MaxConcurrency must be at least 1, got %d", o.maxConcurrency)
	}
	if o.maxConcurrency > maxSlots {
		return o, h, fmt.Errorf("timedqueue: MaxConcurrency must be at most %d, got %d", maxSlots, o.maxConcurrency)
	}
	var err error
	if o.retry, err = o.retry.normalize(); err != nil {
		return o, h, err
	}
	if o.attemptTimeout < 0 {
		return o, h, fmt.Errorf("timedqueue: AttemptTimeout must not be negative, got %v", o.attemptTimeout)
	}
	if o.metrics == nil {
		return o, h, fmt.Errorf("timedqueue: WithMetricsProvider: provider must not be nil")
	}
	if !o.loggerSet {
		o.logger = klog.Background()
	}
	if o.name != "" {
		o.logger = o.logger.WithValues("queue", o.name)
	}
	var ok bool
	if h.failure, ok = o.failureHook.(FailureFunc[K]); o.failureHook != nil && !ok {
		return o, h, fmt.Errorf("timedqueue: WithFailureHook: hook type %T does not match the queue's key type %v", o.failureHook, reflect.TypeFor[K]())
	}
	if h.retry, ok = o.retryHook.(RetryFunc[K]); o.retryHook != nil && !ok {
		return o, h, fmt.Errorf("timedqueue: WithRetryHook: hook type %T does not match the queue's key type %v", o.retryHook, reflect.TypeFor[K]())
	}
	return o, h, nil
}

// maxSlots bounds MaxConcurrency so that counts fit comfortably in an int32.
const maxSlots = 1 << 20
