package app

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

// DebugEvictionsPath is where the metrics server serves [EvictionsHandler].
const DebugEvictionsPath = "/debug/evictions"

// PendingSource is what [EvictionsHandler] reads: every scheduled
// eviction. A *manager.Manager implements it.
type PendingSource interface {
	Pending() []manager.PendingEviction
}

// PendingEvictionJSON is one element of the JSON array that
// /debug/evictions serves: one scheduled eviction of [manager.Manager.Pending].
type PendingEvictionJSON struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the pod's; empty if the pod is gone.
	UID types.UID `json:"uid"`
	// Node is the pod's node; empty if the pod is gone.
	Node string `json:"node"`
	// Taint is the NoExecute taint whose countdown ends at Deadline, as
	// key=value:effect (key:effect without a value); empty if the taint is
	// no longer on the node or the device.
	Taint string `json:"taint"`
	// Device is the DRA device whose taint Taint is, as driver/pool/device;
	// empty for a node's taint.
	Device string `json:"device,omitempty"`
	// Rule is the DeviceTaintRule that put Taint on Device; empty for a
	// node's taint or a taint of the device's ResourceSlice.
	Rule string `json:"rule,omitempty"`
	// Deadline is when the pod is due to go, in RFC 3339 (UTC, with
	// fractional seconds when there are any). Refusals, retries and budget
	// waits do not move it.
	Deadline string `json:"deadline"`
	// Attempts counts the attempts made: failed ones and ones a disruption
	// budget refused.
	Attempts int `json:"attempts"`
	// LastError is the last attempt's error, or "".
	LastError string `json:"lastError"`
	// FailingSince is, for an eviction whose attempts keep failing, when
	// the first of them failed, in RFC 3339; omitted otherwise.
	FailingSince string `json:"failingSince,omitempty"`
	// Failed is true for an eviction given up because its attempts ran out
	// (with a Warning event and taintkit_evictions_total{outcome="failed"}):
	// the pod stays until its next update decides again.
	Failed bool `json:"failed"`
}

// NewPendingEvictionJSON returns p as /debug/evictions shows it.
func NewPendingEvictionJSON(p manager.PendingEviction) PendingEvictionJSON {
	out := PendingEvictionJSON{
		Namespace: p.Namespace,
		Name:      p.Name,
		UID:       p.UID,
		Node:      p.Node,
		Attempts:  p.Attempts,
		LastError: p.LastError,
		Failed:    p.Failed,
		Device:    p.Device.String(),
		Rule:      p.Rule,
	}
	if p.Taint.Key != "" {
		out.Taint = p.Taint.ToString()
	}
	if !p.Deadline.IsZero() {
		out.Deadline = p.Deadline.UTC().Format(time.RFC3339Nano)
	}
	if !p.FailingSince.IsZero() {
		out.FailingSince = p.FailingSince.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// EvictionsHandler serves /debug/evictions: a JSON array of
// [PendingEvictionJSON], sorted by deadline, then namespace and name, of
// the evictions the running manager has scheduled or given up; an empty array when no
// manager runs (a standby replica, or before the caches synced). Each GET
// reads every scheduled pod and its node from the informers' caches: it is
// for an operator's look, not for scraping every second. It is safe for
// concurrent use by multiple goroutines. The zero value serves an empty
// array until [EvictionsHandler.SetSource] is called.
type EvictionsHandler struct {
	source atomic.Pointer[PendingSource]
}

// SetSource makes s the source of the list; nil makes it empty.
func (h *EvictionsHandler) SetSource(s PendingSource) {
	if s == nil {
		h.source.Store(nil)
		return
	}
	h.source.Store(&s)
}

// ServeHTTP answers GET and HEAD with the list as application/json, and
// other methods with 405.
func (h *EvictionsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	list := []PendingEvictionJSON{} // [] rather than null when empty
	if s := h.source.Load(); s != nil {
		pending := (*s).Pending()
		list = make([]PendingEvictionJSON, 0, len(pending))
		for _, p := range pending {
			list = append(list, NewPendingEvictionJSON(p))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(list) // an error is the client's going away
}
