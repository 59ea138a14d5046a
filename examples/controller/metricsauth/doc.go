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
//
// Answers are cached as that filter caches them (k8s.io/apiserver's token
// cache and delegating authorizer): a TokenReview's, accepted or rejected,
// for [TokenCacheTTL], by a SHA-256 digest of the token; a
// SubjectAccessReview's for [AllowCacheTTL] if it allowed the request and
// [DenyCacheTTL] if not, by user, groups, extra, verb and path. A review
// that could not be made is not cached; a SubjectAccessReview that failed
// for a reason that may pass (a connection reset, 429, 500, 504) is tried
// five times over about 5.6 s first. Each cache holds at most [CacheSize]
// answers, so that a client sending random tokens costs reviews but not
// memory (k8s.io/apimachinery's LRUExpireCache: the least recently used
// goes first). The reviews go through client-go's typed clients: a binary
// that imports metricsauth links neither k8s.io/apiserver nor
// controller-runtime, whose filter brings CEL, gRPC and OpenTelemetry with
// it.
//
// [Filter] has the shape of controller-runtime's metricsserver.Filter; a
// controller-runtime manager takes the filter as
// metricsserver.Options{FilterProvider: metricsauth.NewAs[metricsserver.Filter]}.
package metricsauth
