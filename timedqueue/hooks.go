package timedqueue

// FailureFunc gets a schedule as it finally failed, and its last error.
type FailureFunc[K comparable] func(w TimedWorker[K], err error)

// RetryFunc gets a schedule whose attempt failed with err, to retry at w.NextAttempt.
type RetryFunc[K comparable] func(w TimedWorker[K], err error)

// hooks holds a queue's hooks, nil if not set. A queue's hooks are replaced
// whole (copy on write), so a reader sees one consistent set.
type hooks[K comparable] struct {
	failure FailureFunc[K]
	retry   RetryFunc[K]
	admit   AdmitFunc[K]
}

// SetFailureHook makes f the function called for each schedule that finally
// fails, after its key is freed; nil removes it. It may be called at any time.
func (q *TimedWorkerQueue[K]) SetFailureHook(f FailureFunc[K]) {
	q.setHooks(func(h *hooks[K]) { h.failure = f })
}

// SetRetryHook makes f the function called for each failed attempt once its
// retry is armed (a step to w.NextAttempt starts it); nil removes it.
func (q *TimedWorkerQueue[K]) SetRetryHook(f RetryFunc[K]) {
	q.setHooks(func(h *hooks[K]) { h.retry = f })
}

func (q *TimedWorkerQueue[K]) setHooks(change func(*hooks[K])) {
	q.hooksMu.Lock()
	defer q.hooksMu.Unlock()
	h := *q.hooks.Load()
	change(&h)
	q.hooks.Store(&h)
}
