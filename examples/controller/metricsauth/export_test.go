package metricsauth

import "net/http"

// NewWithClients is New on given clients, clock and retry backoff.
var NewWithClients = newFilter

// CacheLens returns how many answers h, a handler a Filter returned, holds:
// TokenReviews' and SubjectAccessReviews', expired ones included.
func CacheLens(h http.Handler) (tokens, reviews int) {
	f := h.(*filter)
	return f.users.len(), f.decisions.len()
}
