package timedqueue

import (
	"fmt"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultMaxConcurrency is the number of work funcs a queue runs at once when
// [WithMaxConcurrency] is not given. It bounds the load a burst of due work puts
// on whatever the work funcs call (the original started one goroutine per due
// item: 100k pods on a failed node meant 100k simultaneous API calls).
const DefaultMaxConcurrency = 32

// Option configures a [TimedWorkerQueue]. Options not given keep the defaults
// stated on each. [New] validates them and returns an error for a bad value.
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

// WithClock sets the clock the queue reads time from and arms its timer on.
// The default is clock.RealClock{}. New returns an error for a nil clock.
// Tests pass a k8s.io/utils/clock/testing.FakeClock.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(o *options) { o.clock, o.clockSet = c, true })
}

// WithMaxConcurrency bounds how many work funcs run at once; withdrawn attempts
// (cancelled while running) count until they return. The default is
// DefaultMaxConcurrency. New returns an error if n < 1 or n > 1<<20 (1048576).
func WithMaxConcurrency(n int) Option {
	return optionFunc(func(o *options) { o.maxConcurrency = n })
}

// WithRetry sets how failed attempts are retried; see [RetryPolicy] for the
// defaults of its zero fields. New returns an error for negative fields or a
// MaxBackoff below InitialBackoff.
func WithRetry(p RetryPolicy) Option {
	return optionFunc(func(o *options) { o.retry = p })
}

// WithLogger sets the logger for failures, recovered panics and dropped work.
// The default is klog.Background().
func WithLogger(l logr.Logger) Option {
	return optionFunc(func(o *options) { o.logger, o.loggerSet = l, true })
}

// WithMetricsProvider sets the provider of the queue's metrics. The default
// records nothing. New returns an error for a nil provider.
func WithMetricsProvider(p MetricsProvider) Option {
	return optionFunc(func(o *options) { o.metrics = p })
}

// WithName names the queue in its log lines and passes name to the
// MetricsProvider. The default is "".
func WithName(name string) Option {
	return optionFunc(func(o *options) { o.name = name })
}

// WithAttemptTimeout bounds each attempt: the ctx given to the work func is
// cancelled d after the attempt started, as read from the queue's clock (not
// the runtime's: no runtime timer is involved), and its Deadline reports that
// time. After a timeout, the ctx's Err returns context.DeadlineExceeded and
// context.Cause returns context.DeadlineExceeded. A ctx derived from it (with
// context.WithCancel, WithTimeout, ...) is cancelled at the same moment; its
// Err may be context.Canceled, but context.Cause(derived) is
// context.DeadlineExceeded too, so test the cause. The work func must return on its own; a
// timed-out attempt that returns an error is a failure like any other. Zero,
// the default, means no timeout. New returns an error if d < 0.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.attemptTimeout = d })
}

// FailureFunc is called when a schedule finally fails: its last attempt failed,
// an attempt returned a [Permanent] error, or an attempt failed after Shutdown.
// w is the schedule as it was when it ended (Attempts counts every failed
// attempt, Running is false); err is the error of the last attempt, or a
// *[PanicError] if it panicked.
type FailureFunc[K comparable] func(w TimedWorker[K], err error)

// WithFailureHook sets a function called once for each schedule that finally
// fails. It is called on the worker goroutine that ran the last attempt, after
// the key has been released (GetWorker reports false, AddWork may schedule the
// key again) and without any lock held, so it may call any method of the queue.
// It must not block: the worker holds a concurrency slot until it returns.
// [TimedWorkerQueue.Shutdown] does not wait for it (the hook may call
// Shutdown). A panic in it is recovered and logged. New returns an error if K is not the
// queue's key type.
func WithFailureHook[K comparable](f FailureFunc[K]) Option {
	return optionFunc(func(o *options) { o.failureHook = f })
}

// RetryFunc is called when an attempt failed and will be retried. w is the
// schedule after the failure: Attempts counts its failed attempts and
// NextAttempt is when the retry starts; err is the attempt's error, or a
// *[PanicError].
type RetryFunc[K comparable] func(w TimedWorker[K], err error)

// WithRetryHook sets a function called once for each failed attempt that
// will be retried, after the retry is scheduled: GetWorker reports it, and
// moving the clock to w.NextAttempt starts it (possibly before the hook
// returns). It is called as the failure hook is. New returns an error if K is
// not the queue's key type.
func WithRetryHook[K comparable](f RetryFunc[K]) Option {
	return optionFunc(func(o *options) { o.retryHook = f })
}

// hooks holds a queue's hooks, nil if not set.
type hooks[K comparable] struct {
	failure FailureFunc[K]
	retry   RetryFunc[K]
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
