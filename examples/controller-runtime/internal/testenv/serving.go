package testenv

import (
	"sync"

	"github.com/go-logr/logr"
)

// servingLog is the message controller-runtime's metrics server logs once
// its listener is open, with its bind address: from then on a connection
// is accepted (the kernel queues it until the server's accept loop runs).
const servingLog = "Serving metrics server"

// listening closes a channel per bind address when the metrics server
// bound to it logs servingLog.
var listening struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// MetricsServing returns a channel closed once controller-runtime's metrics
// server bound to addr (its BindAddress, as given) has opened its listener.
// Call it before the manager starts: each call waits for a new start (an
// address may be used again by a later test). It is how a test waits for the
// server instead of retrying refused connections: the server logs that it
// serves through the logger [Main] sets.
func MetricsServing(addr string) <-chan struct{} {
	listening.mu.Lock()
	defer listening.mu.Unlock()
	if listening.ch != nil {
		delete(listening.ch, addr)
	}
	return servingChan(addr)
}

func servingChan(addr string) chan struct{} {
	if listening.ch == nil {
		listening.ch = map[string]chan struct{}{}
	}
	ch := listening.ch[addr]
	if ch == nil {
		ch = make(chan struct{})
		listening.ch[addr] = ch
	}
	return ch
}

// watchServing returns a logger that passes everything to l and, when the
// metrics server says it serves, closes that address's channel.
func watchServing(l logr.Logger) logr.Logger {
	return logr.New(&servingSink{LogSink: l.GetSink()})
}

// servingSink is a LogSink that sees every Info call, whatever the level of
// the sink it wraps, and passes on only those that sink takes.
type servingSink struct {
	logr.LogSink
	values []any
}

func (s *servingSink) Enabled(int) bool { return true }

func (s *servingSink) Info(level int, msg string, kv ...any) {
	if msg == servingLog {
		if addr, ok := lookup("bindAddress", kv, s.values); ok {
			listening.mu.Lock()
			ch := servingChan(addr)
			select {
			case <-ch:
			default:
				close(ch)
			}
			listening.mu.Unlock()
		}
	}
	if s.LogSink.Enabled(level) {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s *servingSink) WithValues(kv ...any) logr.LogSink {
	return &servingSink{LogSink: s.LogSink.WithValues(kv...), values: append(append([]any(nil), s.values...), kv...)}
}

func (s *servingSink) WithName(name string) logr.LogSink {
	return &servingSink{LogSink: s.LogSink.WithName(name), values: s.values}
}

// lookup finds key's string value in key/value lists, the last first.
func lookup(key string, lists ...[]any) (string, bool) {
	for _, kv := range lists {
		for i := len(kv) - 2; i >= 0; i -= 2 {
			if k, ok := kv[i].(string); ok && k == key {
				v, ok := kv[i+1].(string)
				return v, ok
			}
		}
	}
	return "", false
}
