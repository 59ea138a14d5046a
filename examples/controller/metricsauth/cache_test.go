package metricsauth_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/taintkit/taintkit/examples/controller/metricsauth"
)

// NewAs hands the filter to a metrics server that declares a filter type of
// its own with the same shape, as controller-runtime's metricsserver does.
type otherFilter func(logr.Logger, http.Handler) (http.Handler, error)

var _ func(*rest.Config, *http.Client) (otherFilter, error) = metricsauth.NewAs[otherFilter]

// fakeAPI answers TokenReviews and SubjectAccessReviews on a fake
// clientset, from what the test sets, and counts them.
type fakeAPI struct {
	mu                          sync.Mutex
	users                       map[string]string // token → user name
	allowed                     map[string]bool   // "user verb path"
	tokenErr                    error             // answered to every TokenReview while set
	reviewErr                   error             // answered to every SubjectAccessReview while set
	tokenReviews, accessReviews int
}

func (a *fakeAPI) set(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f()
}

// counts returns the TokenReviews and SubjectAccessReviews made so far.
func (a *fakeAPI) counts() (tokenReviews, accessReviews int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokenReviews, a.accessReviews
}

func (a *fakeAPI) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.tokenReviews++
		if a.tokenErr != nil {
			return true, nil, a.tokenErr
		}
		review := action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if name, ok := a.users[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: name, UID: "uid-" + name, Groups: []string{"system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"scope": {"metrics"}},
			}}
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "unknown token"}
		}
		return true, review, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.accessReviews++
		if a.reviewErr != nil {
			return true, nil, a.reviewErr
		}
		review := action.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		s := review.Spec
		if s.NonResourceAttributes == nil || s.UID != "uid-"+s.User || len(s.Groups) != 1 || len(s.Extra["scope"]) != 1 {
			return true, nil, fmt.Errorf("unexpected SubjectAccessReview spec %+v", s)
		}
		allowed := a.allowed[s.User+" "+s.NonResourceAttributes.Verb+" "+s.NonResourceAttributes.Path]
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}
		if !allowed {
			review.Status.Reason = "no RBAC rule"
		}
		return true, review, nil
	})
	return cs
}

// fixture is a filter's handler on a fakeAPI and a fake clock.
type fixture struct {
	api     *fakeAPI
	clock   *clocktesting.FakeClock
	handler http.Handler
	sink    *countingSink
}

// retry is the tests' SubjectAccessReview backoff: three attempts, a
// millisecond apart.
var retry = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fx := &fixture{
		api: &fakeAPI{
			users:   map[string]string{"reader-token": "reader", "nobody-token": "nobody"},
			allowed: map[string]bool{"reader get /metrics": true},
		},
		clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		sink:  &countingSink{},
	}
	cs := fx.api.clientset()
	filter := metricsauth.NewWithClients(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), fx.clock, retry)
	h, err := filter(logr.New(fx.sink), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "the bearer token reached the handler", http.StatusTeapot)
			return
		}
		io.WriteString(w, "ok")
	}))
	require.NoError(t, err)
	fx.handler = h
	return fx
}

// do serves method path with token as its bearer token (none if empty) and
// returns the answer's code.
func (fx *fixture) do(method, path, token string) int {
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	fx.handler.ServeHTTP(rec, req)
	return rec.Code
}

func (fx *fixture) get(token string) int { return fx.do(http.MethodGet, "/metrics", token) }

// An accepted token is reviewed once per TokenCacheTTL, however many
// requests carry it.
func TestAcceptedTokenCached(t *testing.T) {
	fx := newFixture(t)
	for range 3 {
		assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	}
	tokens, _ := fx.api.counts()
	assert.Equal(t, 1, tokens, "TokenReviews for three requests with one token")

	fx.clock.Step(metricsauth.TokenCacheTTL)
	assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	tokens, _ = fx.api.counts()
	assert.Equal(t, 1, tokens, "TokenReviews at the end of the answer's lifetime")

	fx.clock.Step(time.Nanosecond)
	assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	tokens, _ = fx.api.counts()
	assert.Equal(t, 2, tokens, "TokenReviews once the answer expired")
}

// A rejected token is 401 and reviewed once per TokenCacheTTL too: a
// scraper with an expired token costs the API server a review a minute.
func TestRejectedTokenCached(t *testing.T) {
	fx := newFixture(t)
	for range 3 {
		assert.Equal(t, http.StatusUnauthorized, fx.get("expired-token"))
	}
	tokens, reviews := fx.api.counts()
	assert.Equal(t, 1, tokens)
	assert.Zero(t, reviews, "SubjectAccessReviews for a rejected token")

	// The token is accepted now (it was the API server's mistake): the
	// rejection holds until it expires.
	fx.api.set(func() { fx.api.users["expired-token"] = "reader" })
	fx.clock.Step(metricsauth.TokenCacheTTL)
	assert.Equal(t, http.StatusUnauthorized, fx.get("expired-token"))
	fx.clock.Step(time.Nanosecond)
	assert.Equal(t, http.StatusOK, fx.get("expired-token"))
	tokens, _ = fx.api.counts()
	assert.Equal(t, 2, tokens)

	errs, infos := fx.sink.counts()
	assert.Zero(t, errs, "error log lines: %v", fx.sink.errors)
	assert.Zero(t, infos, "info lines at verbosity 0")
}

// A SubjectAccessReview that allowed a request is reused for AllowCacheTTL,
// across the token's own reviews: a permission taken away is seen once it
// expires.
func TestAllowCached(t *testing.T) {
	fx := newFixture(t)
	assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	fx.api.set(func() { delete(fx.api.allowed, "reader get /metrics") })

	fx.clock.Step(metricsauth.AllowCacheTTL)
	assert.Equal(t, http.StatusOK, fx.get("reader-token"), "allowed from the cache")
	tokens, reviews := fx.api.counts()
	assert.Equal(t, 2, tokens, "the token's answer expired meanwhile")
	assert.Equal(t, 1, reviews)

	fx.clock.Step(time.Nanosecond)
	assert.Equal(t, http.StatusForbidden, fx.get("reader-token"))
	_, reviews = fx.api.counts()
	assert.Equal(t, 2, reviews)
}

// A SubjectAccessReview that did not allow a request is reused for
// DenyCacheTTL: a permission granted is seen within 30 s.
func TestDenyCached(t *testing.T) {
	fx := newFixture(t)
	assert.Equal(t, http.StatusForbidden, fx.get("nobody-token"))
	fx.api.set(func() { fx.api.allowed["nobody get /metrics"] = true })

	fx.clock.Step(metricsauth.DenyCacheTTL)
	assert.Equal(t, http.StatusForbidden, fx.get("nobody-token"), "denied from the cache")
	_, reviews := fx.api.counts()
	assert.Equal(t, 1, reviews)

	fx.clock.Step(time.Nanosecond)
	assert.Equal(t, http.StatusOK, fx.get("nobody-token"))
	_, reviews = fx.api.counts()
	assert.Equal(t, 2, reviews)

	errs, infos := fx.sink.counts()
	assert.Zero(t, errs, "error log lines: %v", fx.sink.errors)
	assert.Zero(t, infos, "info lines at verbosity 0")
}

// The cached answer is the one for the same user, verb and path: another
// path or verb is another review.
func TestAccessCachedPerVerbAndPath(t *testing.T) {
	fx := newFixture(t)
	assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	assert.Equal(t, http.StatusForbidden, fx.do(http.MethodGet, "/debug/evictions", "reader-token"))
	assert.Equal(t, http.StatusForbidden, fx.do(http.MethodHead, "/metrics", "reader-token"), "verb head")
	assert.Equal(t, http.StatusForbidden, fx.get("nobody-token"))
	assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	_, reviews := fx.api.counts()
	assert.Equal(t, 4, reviews)
}

// A review that could not be made is 500, and is not cached: the next
// request asks again, and succeeds once the API server answers. A
// SubjectAccessReview failing for a reason that may pass is tried again
// first; one failing for another reason is not.
func TestErrorsNotCached(t *testing.T) {
	fx := newFixture(t)
	unreachable := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	fx.api.set(func() { fx.api.tokenErr = unreachable })
	assert.Equal(t, http.StatusInternalServerError, fx.get("reader-token"))
	assert.Equal(t, http.StatusInternalServerError, fx.get("reader-token"))
	tokens, _ := fx.api.counts()
	assert.Equal(t, 2, tokens, "TokenReviews: one per request, none cached")

	fx.api.set(func() {
		fx.api.tokenErr = nil
		fx.api.reviewErr = apierrors.NewInternalError(errors.New("etcd is down"))
	})
	assert.Equal(t, http.StatusInternalServerError, fx.get("reader-token"))
	_, reviews := fx.api.counts()
	assert.Equal(t, retry.Steps, reviews, "a 500 is tried again, up to the backoff's steps")

	fx.api.set(func() {
		fx.api.reviewErr = apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", errors.New("no RBAC rule"))
	})
	assert.Equal(t, http.StatusInternalServerError, fx.get("reader-token"))
	_, reviews = fx.api.counts()
	assert.Equal(t, retry.Steps+1, reviews, "a 403 to the review itself is not tried again")

	fx.api.set(func() { fx.api.reviewErr = nil })
	assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	tokens, reviews = fx.api.counts()
	assert.Equal(t, 3, tokens, "the TokenReview that succeeded was cached")
	assert.Equal(t, retry.Steps+2, reviews)

	// Four failed requests on a clock that stood still: one error line.
	errs, _ := fx.sink.counts()
	assert.Equal(t, 1, errs, "error log lines: %v", fx.sink.errors)
}

// Many distinct tokens cost a review each but never more than CacheSize
// answers; a full cache drops the least recently used.
func TestCacheBounded(t *testing.T) {
	fx := newFixture(t)
	const tokens = metricsauth.CacheSize + 500
	for i := range tokens {
		require.Equal(t, http.StatusUnauthorized, fx.get(fmt.Sprintf("random-%d", i)))
	}
	reviewed, _ := fx.api.counts()
	assert.Equal(t, tokens, reviewed)
	held, _ := metricsauth.CacheLens(fx.handler)
	assert.Equal(t, metricsauth.CacheSize, held)

	// The latest token is still cached; the first was dropped for room.
	assert.Equal(t, http.StatusUnauthorized, fx.get(fmt.Sprintf("random-%d", tokens-1)))
	reviewed, _ = fx.api.counts()
	assert.Equal(t, tokens, reviewed, "the latest token answered from the cache")
	assert.Equal(t, http.StatusUnauthorized, fx.get("random-0"))
	reviewed, _ = fx.api.counts()
	assert.Equal(t, tokens+1, reviewed, "the first token, dropped for room, reviewed again")

	// Once they have expired, none of them answers any more.
	fx.clock.Step(metricsauth.TokenCacheTTL + time.Nanosecond)
	assert.Equal(t, http.StatusOK, fx.get("reader-token"))
	held, decisions := metricsauth.CacheLens(fx.handler)
	assert.Equal(t, 1, held)
	assert.Equal(t, 1, decisions)
}
