package app

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// Bounds of waitForServer's wait between tries.
const (
	unreachableFirstWait = 100 * time.Millisecond
	unreachableMaxWait   = time.Second
)

// waitForServer is the transport of the controller's requests (not the
// leader election's): a request that could not be sent because the API
// server could not be reached at all (the connection refused: the server
// restarting, a network cut) is sent again after 100 ms, 200 ms, … then
// every second, until it is sent or its context ends. So an outage uses up
// none of an eviction's attempts, and the informers, whose lists and
// watches wait the same way, relist as soon as the server is back, instead
// of after the reflectors' own backoff (up to a minute after a long
// outage). A request that may have reached the server (its connection broke
// after it was sent) is not sent again here: its error goes to the caller,
// who decides from what it reads next.
type waitForServer struct {
	next http.RoundTripper
}

func (w waitForServer) RoundTrip(req *http.Request) (*http.Response, error) {
	wait := unreachableFirstWait
	for {
		resp, err := w.next.RoundTrip(req)
		if err == nil || !notSent(err) || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		wait = min(2*wait, unreachableMaxWait)
		if req.GetBody != nil {
			body, berr := req.GetBody()
			if berr != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// notSent reports whether err means the request never left: no connection
// to the server could be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
