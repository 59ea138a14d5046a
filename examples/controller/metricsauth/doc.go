// Package metricsauth authenticates and authorizes the requests of a
// metrics server with the API server, as controller-runtime's
// filters.WithAuthenticationAndAuthorization does (a TokenReview per bearer
// token, a SubjectAccessReview per path, both cached), but answers each
// failure for what it is:
//
//   - no bearer token, or a token the TokenReview rejected: 401
//     Unauthorized, logged at V(4) with the review's reason;
//   - a user the SubjectAccessReview does not allow: 403 Forbidden, logged
//     at V(4);
//   - a review that could not be made (the API server unreachable, or
//     answering with an error): 500, logged as an error at most once per
//     [ErrorLogInterval], with the number of failures since the last one.
//
// controller-runtime's filter (v0.25) answers a rejected token with 500 and
// an error log line per request: a scraper with an expired token looks like
// a broken controller, and floods its log.
package metricsauth
