package app

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptedTransport answers each round trip with the next error of its
// script, then with 200; it records the bodies it was sent.
type scriptedTransport struct {
	errs   []error
	bodies []string
	at     []time.Time
}

func (s *scriptedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.at = append(s.at, time.Now())
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		s.bodies = append(s.bodies, string(b))
	}
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}

// A request the server could not be reached for is sent again, body and
// all, after 100 ms, 200 ms, 400 ms, …, at most a second apart, until it
// goes through.
func TestWaitForServerResendsUnsentRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scriptedTransport{errs: []error{refused, refused, refused, refused, refused, refused}}
		req, err := http.NewRequest(http.MethodDelete, "https://127.0.0.1:1/api/v1/namespaces/ns/pods/p", strings.NewReader(`{"preconditions":{"uid":"u"}}`))
		require.NoError(t, err)
		start := time.Now()
		resp, err := waitForServer{next: s}.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		require.Len(t, s.at, 7)
		var gaps []time.Duration
		for i := 1; i < len(s.at); i++ {
			gaps = append(gaps, s.at[i].Sub(s.at[i-1]))
		}
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}, gaps)
		assert.Equal(t, 3500*ms, time.Since(start))
		for _, b := range s.bodies {
			assert.Equal(t, `{"preconditions":{"uid":"u"}}`, b, "every try sends the whole body")
		}
	})
}

// An error after the request may have reached the server is the caller's:
// sending it again could repeat a write the server applied.
func TestWaitForServerReturnsErrorsAfterSending(t *testing.T) {
	for _, err := range []error{io.ErrUnexpectedEOF, errors.New("stream error: stream ID 3; INTERNAL_ERROR"), &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}} {
		s := &scriptedTransport{errs: []error{err}}
		req, rerr := http.NewRequest(http.MethodDelete, "https://127.0.0.1:1/x", strings.NewReader("{}"))
		require.NoError(t, rerr)
		_, got := waitForServer{next: s}.RoundTrip(req)
		assert.ErrorIs(t, got, err)
		assert.Len(t, s.at, 1, "%v: sent again", err)
	}
}

// The wait ends with the request's context.
func TestWaitForServerEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scriptedTransport{errs: []error{refused, refused, refused, refused, refused, refused, refused, refused}}
		ctx, cancel := context.WithTimeout(t.Context(), 1600*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:1/api/v1/pods", nil)
		require.NoError(t, err)
		_, err = waitForServer{next: s}.RoundTrip(req)
		assert.ErrorIs(t, err, refused)
		assert.Len(t, s.at, 5, "tries at 0, 0.1, 0.3, 0.7 and 1.5 s; the next would be at 2.5 s")
	})
}
