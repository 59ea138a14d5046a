package noexecute

import (
	"encoding/json"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taintkit/taintkit/examples/internal/manager"
)

// PendingEvictionJSON is one element of the JSON array DebugEvictionsPath
// serves, as examples/controller's /debug/evictions does.
type PendingEvictionJSON struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`       // empty if the pod is gone
	Node      string    `json:"node"`      // empty if the pod is gone
	Taint     string    `json:"taint"`     // key=value:effect; empty if it left the node
	Deadline  string    `json:"deadline"`  // RFC 3339, UTC
	Attempts  int       `json:"attempts"`  // failed and refused attempts
	LastError string    `json:"lastError"` // the last one's error, or ""
}

// evictionsHandler serves the manager's scheduled evictions, sorted by
// deadline: an empty array on a standby, whose manager never runs.
type evictionsHandler struct{ m *manager.Manager }

func (h evictionsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	list := []PendingEvictionJSON{}
	for _, p := range h.m.Pending() {
		e := PendingEvictionJSON{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: p.Node,
			Deadline: p.Deadline.UTC().Format(time.RFC3339Nano), Attempts: p.Attempts, LastError: p.LastError}
		if p.Taint.Key != "" {
			e.Taint = p.Taint.ToString()
		}
		list = append(list, e)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list) // an error is the client's going away
}
