package metricsauth

import "net/http"

// NewWithClients is New on given clients, clock and retry backoff.
var NewWithClients = newFilter

// CacheLens returns how many answers h, a handler a Filter returned, holds:
// TokenReviews' and SubjectAccessReviews' that have not expired.
func CacheLens(h http.Handler) (tokens, reviews int) {
	f := h.(*filter)
	return len(f.users.Keys()), len(f.decisions.Keys())
}
