package metricsauth

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Caching and timeouts, as controller-runtime's filter has them.
const (
	// TokenCacheTTL is how long a TokenReview's answer, accepted or
	// rejected, is reused for the same token.
	TokenCacheTTL = time.Minute
	// ReviewTimeout bounds one TokenReview.
	ReviewTimeout = 10 * time.Second
	// ErrorLogInterval is the least time between two error log lines
	// about reviews that could not be made.
	ErrorLogInterval = 10 * time.Second
)

// New returns a filter for a metrics server (controller-runtime's
// metricsserver.Filter, and its Options.FilterProvider) that makes its
// reviews with config's credentials over httpClient.
func New(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: SubjectAccessReview client: %w", err)
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	az, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metricsauth: authorizer: %w", err)
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		reviewer := &tokenReviewer{client: authn.TokenReviews(), log: log}
		return &filter{
			tokens: tokencache.New(reviewer, false, TokenCacheTTL, TokenCacheTTL),
			authz:  az,
			log:    log,
			errors: &errorLog{log: log, every: ErrorLogInterval},
			next:   next,
		}, nil
	}, nil
}

type filter struct {
	tokens authenticator.Token
	authz  authorizer.Authorizer
	log    logr.Logger
	errors *errorLog
	next   http.Handler
}

func (f *filter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	token, ok := bearerToken(req)
	if !ok {
		f.log.V(4).Info("Unauthorized: no bearer token", "path", req.URL.Path)
		unauthorized(w)
		return
	}
	resp, ok, err := f.tokens.AuthenticateToken(req.Context(), token)
	if err != nil {
		f.errors.report(err, "Authentication failed: the TokenReview could not be made")
		http.Error(w, "Authentication failed", http.StatusInternalServerError)
		return
	}
	if !ok {
		unauthorized(w)
		return
	}
	attrs := authorizer.AttributesRecord{User: resp.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
	decision, reason, err := f.authz.Authorize(req.Context(), attrs)
	if err != nil {
		f.errors.report(err, "Authorization failed: the SubjectAccessReview could not be made", "user", resp.User.GetName())
		http.Error(w, fmt.Sprintf("Authorization for user %s failed", resp.User.GetName()), http.StatusInternalServerError)
		return
	}
	if decision != authorizer.DecisionAllow {
		f.log.V(4).Info("Forbidden", "user", resp.User.GetName(), "path", req.URL.Path, "reason", reason)
		http.Error(w, fmt.Sprintf("Authorization denied for user %s", resp.User.GetName()), http.StatusForbidden)
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

// tokenReviewer authenticates a token with a TokenReview. A token the
// review rejects is no error (and is cached as rejected); a review that
// could not be made is one (and is not cached).
type tokenReviewer struct {
	client authenticationclient.TokenReviewInterface
	log    logr.Logger
}

func (r *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, ReviewTimeout)
	defer cancel()
	review, err := r.client.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("metricsauth: TokenReview: %w", err)
	}
	st := review.Status
	if !st.Authenticated {
		r.log.V(4).Info("Unauthorized: the TokenReview rejected the token", "reason", st.Error)
		return nil, false, nil
	}
	extra := map[string][]string{}
	for k, v := range st.User.Extra {
		extra[k] = v
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: extra}}, true, nil
}

// errorLog logs errors at most once per interval, saying how many it left
// out since its last line.
type errorLog struct {
	log   logr.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (l *errorLog) report(err error, msg string, kv ...any) {
	l.mu.Lock()
	now := time.Now()
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
