package leasefence

import (
	"fmt"
	"net/http"
	"strings"
)

// Wrap returns rt wrapped so that every write of a pod (its subresources
// included), of an event or of a DeviceTaintRule (its status included) is
// sent only if [Fence.Allowed], checked as the
// request is handed to rt; a refused request does not reach rt, and fails
// with an error wrapping [ErrExpired]. Other requests pass unchecked. Its
// signature is that of [rest.Config.Wrap]'s argument. Put it closest to the
// network, inside any wrapper that retries, so every try is checked.
func (f *Fence) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &fencedTransport{next: rt, f: f}
}

type fencedTransport struct {
	next http.RoundTripper
	f    *Fence
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !fenced(req) || t.f.Allowed() {
		return t.next.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close() // a RoundTripper closes the body, even on errors
	}
	t.f.refused()
	t.f.log.V(2).Info("Refused a request: this replica may no longer lead", "method", req.Method, "path", req.URL.Path)
	return nil, fmt.Errorf("%w: %s %s not sent", ErrExpired, req.Method, req.URL.Path)
}

// fenced reports whether req writes a pod (or one of its subresources), an
// event or a DeviceTaintRule: a request other than GET, HEAD or OPTIONS
// whose path has api/v1/namespaces/NS/pods, api/v1/namespaces/NS/events,
// apis/events.k8s.io/VERSION/namespaces/NS/events or
// apis/resource.k8s.io/VERSION/devicetaintrules (after any prefix of the
// server's URL).
func fenced(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	for i := 2; i < len(segs); i++ {
		if segs[i] == "devicetaintrules" && segs[i-2] == "resource.k8s.io" && i >= 3 && segs[i-3] == "apis" {
			return true
		}
	}
	for i := 2; i+2 < len(segs); i++ {
		if segs[i] != "namespaces" {
			continue
		}
		switch resource := segs[i+2]; {
		case segs[i-2] == "api" && segs[i-1] == "v1":
			return resource == "pods" || resource == "events"
		case i >= 3 && segs[i-3] == "apis" && segs[i-2] == "events.k8s.io":
			return resource == "events"
		}
	}
	return false
}
