package oracle

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the checks read.
type auditEvent struct {
	AuditID          string                     `json:"auditID"`
	Stage            string                     `json:"stage"`
	Verb             string                     `json:"verb"`
	RequestURI       string                     `json:"requestURI"`
	UserAgent        string                     `json:"userAgent"`
	User             struct{ Username string }  `json:"user"`
	ImpersonatedUser *struct{ Username string } `json:"impersonatedUser"`
	ObjectRef        *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject            json.RawMessage  `json:"requestObject"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime `json:"stageTimestamp"`
}

// Kind is what a write does, as the checks tell writes apart.
type Kind string

// The kinds of write the checks look at.
const (
	PodDelete  Kind = "delete"      // DELETE of a pod
	PodEvict   Kind = "evict"       // create of pods/eviction
	PodStatus  Kind = "status"      // patch or update of pods/status
	PodOther   Kind = "pod"         // any other write to a pod
	LeaseWrite Kind = "lease"       // create, update or patch of a Lease
	EventWrite Kind = "event"       // a write of an Event
	NodeWrite  Kind = "node"        // a write of a node
	RuleStatus Kind = "rule-status" // a write of a DeviceTaintRule's status
	Other      Kind = "other-write" // anything else on record
)

// Request is one request on the audit record: its two stages merged.
type Request struct {
	AuditID    string
	Kind       Kind
	Verb       string
	Namespace  string
	Name       string
	UserAgent  string
	User       string // the impersonated user if any, else the authenticated one
	Identity   string // the controller replica's, from UserAgent; empty for others
	Received   time.Time
	Completed  time.Time // zero if the server never answered (killed)
	Code       int       // the answer's status code; 0 if none
	UID        types.UID // the UID precondition in the body; empty if none
	HasBody    bool      // the body was on record (Request level)
	LeaderElec bool      // a request of the controller's leader election
}

// Applied reports whether the server answered with success.
func (r Request) Applied() bool { return r.Code >= 200 && r.Code < 300 }

func (r Request) String() string {
	code := "no answer"
	if r.Code != 0 {
		code = fmt.Sprint(r.Code)
	}
	who := r.Identity
	if who == "" {
		who = r.UserAgent
	}
	return fmt.Sprintf("%s %s/%s uid=%q by %q at %s (%s, audit %s)", r.Kind, r.Namespace, r.Name, r.UID, who,
		r.Received.Format("15:04:05.000000"), code, r.AuditID)
}

// controllerAgent matches the User-Agent of app.UserAgent.
var controllerAgent = regexp.MustCompile(`^taintkit-noexecute/\S+ \(([^)]+)\)( leader-election)?$`)

// ReadAudit reads the audit log at path and returns its requests in the
// order the server received them: for a test's own checks of who wrote
// what, and when.
func ReadAudit(path string) ([]Request, error) { return readAudit(path) }

// readAudit reads the audit log at path and returns its requests in the
// order the server received them.
func readAudit(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("oracle: audit log: %w", err)
	}
	defer f.Close()
	byID := map[string]*Request{}
	dry := map[string]bool{}
	var order []*Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// A server killed mid-line leaves a partial last line.
			continue
		}
		if ev.Verb == "get" || ev.Verb == "list" || ev.Verb == "watch" {
			continue // the checks are about writes; a policy may record reads too
		}
		if strings.Contains(ev.RequestURI, "dryRun=") || dryRun(ev.RequestObject) {
			// A dry run writes nothing (a test's probe of an admission
			// policy). Its request body, where a delete's options say so,
			// is on the record at the Request level, in some stages.
			dry[ev.AuditID] = true
		}
		r, ok := byID[ev.AuditID]
		if !ok {
			r = newRequest(&ev)
			byID[ev.AuditID] = r
			order = append(order, r)
		}
		if len(ev.RequestObject) > 0 && !r.HasBody {
			r.HasBody = true
			r.UID = preconditionUID(r.Kind, ev.RequestObject)
		}
		if ev.Stage == "ResponseComplete" || ev.Stage == "Panic" {
			r.Completed = ev.StageTimestamp.Time
			if ev.ResponseStatus != nil {
				r.Code = ev.ResponseStatus.Code
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("oracle: reading the audit log: %w", err)
	}
	out := make([]Request, 0, len(order))
	for _, r := range order {
		if !dry[r.AuditID] {
			out = append(out, *r)
		}
	}
	slices.SortStableFunc(out, func(a, b Request) int { return a.Received.Compare(b.Received) })
	return out, nil
}

func newRequest(ev *auditEvent) *Request {
	r := &Request{
		AuditID:   ev.AuditID,
		Verb:      ev.Verb,
		UserAgent: ev.UserAgent,
		User:      ev.User.Username,
		Received:  ev.RequestReceivedTimestamp.Time,
		Kind:      Other,
	}
	if ev.ImpersonatedUser != nil {
		r.User = ev.ImpersonatedUser.Username
	}
	if m := controllerAgent.FindStringSubmatch(ev.UserAgent); m != nil {
		r.Identity, r.LeaderElec = m[1], m[2] != ""
	}
	ref := ev.ObjectRef
	if ref == nil {
		return r
	}
	r.Namespace, r.Name = ref.Namespace, ref.Name
	switch {
	case ref.APIGroup == "" && ref.Resource == "pods":
		switch {
		case ref.Subresource == "" && ev.Verb == "delete":
			r.Kind = PodDelete
		case ref.Subresource == "eviction" && ev.Verb == "create":
			r.Kind = PodEvict
		case ref.Subresource == "status" && (ev.Verb == "patch" || ev.Verb == "update"):
			r.Kind = PodStatus
		default:
			r.Kind = PodOther
		}
	case ref.APIGroup == "coordination.k8s.io" && ref.Resource == "leases":
		r.Kind = LeaseWrite
	case ref.Resource == "events":
		r.Kind = EventWrite
	case ref.APIGroup == "" && ref.Resource == "nodes":
		r.Kind = NodeWrite
	case ref.APIGroup == "resource.k8s.io" && ref.Resource == "devicetaintrules" && ref.Subresource == "status":
		r.Kind = RuleStatus
	}
	return r
}

// preconditionUID finds the UID a write is conditional on: a delete's
// preconditions, an eviction's deleteOptions' preconditions, a status
// write's metadata.uid.
// dryRun reports whether a request body (delete or create options, an
// Eviction) asks for a dry run.
func dryRun(body json.RawMessage) bool {
	if len(body) == 0 {
		return false
	}
	var obj struct {
		DryRun        []string `json:"dryRun"`
		DeleteOptions *struct {
			DryRun []string `json:"dryRun"`
		} `json:"deleteOptions"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return false
	}
	return len(obj.DryRun) > 0 || obj.DeleteOptions != nil && len(obj.DeleteOptions.DryRun) > 0
}

func preconditionUID(kind Kind, body json.RawMessage) types.UID {
	var obj struct {
		Preconditions *struct {
			UID *types.UID `json:"uid"`
		} `json:"preconditions"`
		DeleteOptions *struct {
			Preconditions *struct {
				UID *types.UID `json:"uid"`
			} `json:"preconditions"`
		} `json:"deleteOptions"`
		Metadata *struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	switch kind {
	case PodDelete:
		if obj.Preconditions != nil && obj.Preconditions.UID != nil {
			return *obj.Preconditions.UID
		}
	case PodEvict:
		if d := obj.DeleteOptions; d != nil && d.Preconditions != nil && d.Preconditions.UID != nil {
			return *d.Preconditions.UID
		}
	case PodStatus:
		if obj.Metadata != nil {
			return obj.Metadata.UID
		}
	}
	return ""
}
