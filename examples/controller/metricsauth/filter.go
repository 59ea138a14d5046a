package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Filter wraps a metrics server's handler next: it returns the handler to
// serve instead, which lets through to next only the requests it
// authenticates and authorizes, and logs to log. It has the shape of
// controller-runtime's metricsserver.Filter; [NewAs] returns it as that
// type.
type Filter func(log logr.Logger, next http.Handler) (http.Handler, error)

// Caching and timeouts, as controller-runtime's filter (k8s.io/apiserver's
// token cache and delegating authorizer) has them.
const (
	// CacheSize is the most answers each of a filter's two caches
	// (TokenReviews, SubjectAccessReviews) holds; a full one drops its
	// least recently used. A client sending many distinct tokens costs a
	// review each, never memory without bound.
	CacheSize = 4096
	// TokenCacheTTL is how long a TokenReview's answer, accepted or
	// rejected, is reused for the same token.
	TokenCacheTTL = time.Minute
	// AllowCacheTTL is how long a SubjectAccessReview that allowed a
	// request is reused for the same user, verb and path.
	AllowCacheTTL = 5 * time.Minute
	// DenyCacheTTL is how long a SubjectAccessReview that did not allow a
	// request is reused: shorter, so that a permission just granted is
	// seen soon.
	DenyCacheTTL = 30 * time.Second
	// ReviewTimeout bounds one TokenReview.
	ReviewTimeout = 10 * time.Second
	// ErrorLogInterval is the least time between two error log lines
	// about reviews that could not be made.
	ErrorLogInterval = 10 * time.Second
)

// reviewRetry is how a SubjectAccessReview that failed for a reason that
// may pass (see retriable) is tried again before the request is answered
// 500: five attempts over about 5.6 s.
var reviewRetry = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// New returns a filter for a metrics server that makes its reviews with
// config's credentials over httpClient. The filter's caches belong to each
// handler it returns.
func New(config *rest.Config, httpClient *http.Client) (Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: SubjectAccessReview client: %w", err)
	}
	return newFilter(authn.TokenReviews(), authz.SubjectAccessReviews(), clock.RealClock{}, reviewRetry), nil
}

// NewAs is [New] returning the filter as F, a function type of the same
// shape declared elsewhere: controller-runtime's metricsserver.Filter, for
// its metricsserver.Options.FilterProvider,
//
//	FilterProvider: metricsauth.NewAs[metricsserver.Filter],
//
// without this package importing controller-runtime.
func NewAs[F ~func(logr.Logger, http.Handler) (http.Handler, error)](config *rest.Config, httpClient *http.Client) (F, error) {
	f, err := New(config, httpClient)
	if err != nil {
		return nil, err
	}
	return F(f), nil
}

// newFilter is New on given clients, clock and retry backoff (fakes in
// tests).
func newFilter(tokens authenticationclient.TokenReviewInterface, reviews authorizationclient.SubjectAccessReviewInterface, clk clock.PassiveClock, retry wait.Backoff) Filter {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return &filter{
			tokens:    tokens,
			reviews:   reviews,
			retry:     retry,
			users:     cache.NewLRUExpireCacheWithClock(CacheSize, clk),
			decisions: cache.NewLRUExpireCacheWithClock(CacheSize, clk),
			log:       log,
			errors:    &errorLog{log: log, clock: clk, every: ErrorLogInterval},
			next:      next,
		}, nil
	}
}

type filter struct {
	tokens    authenticationclient.TokenReviewInterface
	reviews   authorizationclient.SubjectAccessReviewInterface
	retry     wait.Backoff
	users     *cache.LRUExpireCache // tokenAnswers by the token's SHA-256 (no token is held)
	decisions *cache.LRUExpireCache // accessAnswers by the review spec's SHA-256
	log       logr.Logger
	errors    *errorLog
	next      http.Handler
}

// tokenAnswer is a TokenReview's answer: the user, if it authenticated the
// token.
type tokenAnswer struct {
	user          authenticationv1.UserInfo
	authenticated bool
}

// accessAnswer is a SubjectAccessReview's answer.
type accessAnswer struct {
	allowed bool
	reason  string
}

func (f *filter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	token, ok := bearerToken(req)
	if !ok {
		f.log.V(4).Info("Unauthorized: no bearer token", "path", req.URL.Path)
		unauthorized(w)
		return
	}
	user, ok, err := f.authenticate(req.Context(), token)
	if err != nil {
		f.errors.report(err, "Authentication failed: the TokenReview could not be made")
		http.Error(w, "Authentication failed", http.StatusInternalServerError)
		return
	}
	if !ok {
		unauthorized(w)
		return
	}
	answer, err := f.authorize(req.Context(), user, strings.ToLower(req.Method), req.URL.Path)
	if err != nil {
		f.errors.report(err, "Authorization failed: the SubjectAccessReview could not be made", "user", user.Username)
		http.Error(w, fmt.Sprintf("Authorization for user %s failed", user.Username), http.StatusInternalServerError)
		return
	}
	if !answer.allowed {
		f.log.V(4).Info("Forbidden", "user", user.Username, "path", req.URL.Path, "reason", answer.reason)
		http.Error(w, fmt.Sprintf("Authorization denied for user %s", user.Username), http.StatusForbidden)
		return
	}
	req.Header.Del("Authorization")
	f.next.ServeHTTP(w, req)
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	http.Error(w, "Unauthorized", http.StatusUnauthorized)
}

// bearerToken returns the request's bearer token, if it has one.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate returns the user of token, as a TokenReview answers or
// answered within TokenCacheTTL. A token the review rejects is no error
// (and is cached as rejected); a review that could not be made is one (and
// is not cached, so that the next request asks again).
func (f *filter) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := f.users.Get(key); ok {
		a := v.(tokenAnswer)
		return a.user, a.authenticated, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ReviewTimeout)
	defer cancel()
	review, err := f.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("metricsauth: TokenReview: %w", err)
	}
	st := review.Status
	if !st.Authenticated {
		f.log.V(4).Info("Unauthorized: the TokenReview rejected the token", "reason", st.Error)
		f.users.Add(key, tokenAnswer{}, TokenCacheTTL)
		return authenticationv1.UserInfo{}, false, nil
	}
	f.users.Add(key, tokenAnswer{user: st.User, authenticated: true}, TokenCacheTTL)
	return st.User, true, nil
}

// authorize answers whether user may use verb on path (a non-resource URL),
// as a SubjectAccessReview answers or answered within AllowCacheTTL (an
// allowed request) or DenyCacheTTL (one not allowed). A review that fails
// for a reason that may pass is tried again (f.retry); one that could not
// be made is an error, and is not cached.
func (f *filter) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (accessAnswer, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	// The spec as JSON (encoding/json sorts the keys of Extra) is the whole
	// question: user, UID, groups, extra, verb and path.
	raw, err := json.Marshal(spec)
	if err != nil {
		return accessAnswer{}, fmt.Errorf("metricsauth: SubjectAccessReview: %w", err)
	}
	key := sha256.Sum256(raw)
	if v, ok := f.decisions.Get(key); ok {
		return v.(accessAnswer), nil
	}
	var review *authorizationv1.SubjectAccessReview
	var reviewErr error
	err = wait.ExponentialBackoffWithContext(ctx, f.retry, func(ctx context.Context) (bool, error) {
		review, reviewErr = f.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		switch {
		case reviewErr == nil:
			return true, nil
		case retriable(reviewErr):
			return false, nil
		default:
			return false, reviewErr
		}
	})
	switch {
	case reviewErr != nil: // the last attempt's error says more than the backoff's
		return accessAnswer{}, fmt.Errorf("metricsauth: SubjectAccessReview: %w", reviewErr)
	case err != nil:
		return accessAnswer{}, fmt.Errorf("metricsauth: SubjectAccessReview: %w", err)
	}
	st := review.Status
	if st.Allowed && st.Denied {
		return accessAnswer{}, errors.New("metricsauth: the SubjectAccessReview both allowed and denied the request")
	}
	a := accessAnswer{allowed: st.Allowed, reason: st.Reason}
	ttl := DenyCacheTTL
	if a.allowed {
		ttl = AllowCacheTTL
	}
	f.decisions.Add(key, a, ttl)
	return a, nil
}

// retriable reports whether a review that failed with err may succeed if
// tried again, as k8s.io/apiserver's webhooks decide: a connection reset or
// lost, the server's 500, 504 or 429, or an answer with Retry-After.
func retriable(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retryAfter := apierrors.SuggestsClientDelay(err)
	return retryAfter
}

// errorLog logs errors at most once per interval, saying how many it left
// out since its last line.
type errorLog struct {
	log   logr.Logger
	clock clock.PassiveClock
	every time.Duration

	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (l *errorLog) report(err error, msg string, kv ...any) {
	l.mu.Lock()
	now := l.clock.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.skipped++
		l.mu.Unlock()
		return
	}
	skipped := l.skipped
	l.last, l.skipped = now, 0
	l.mu.Unlock()
	l.log.Error(err, msg, append(kv, "notLoggedSinceLast", skipped)...)
}
