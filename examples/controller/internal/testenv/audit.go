package testenv

import (
	"os"
	"path/filepath"
	"strings"
)

// auditPolicy is the audit policy of every Env: the API server's own record
// of what the controller wrote, which the tests' oracle reads. The first rule
// that matches a request decides its level.
//
//   - Request (the request's body: the precondition UID) for the writes that
//     remove a pod or say why it goes: pod deletes, pods/eviction creates,
//     pods/status writes;
//   - Request for the writes of DeviceTaintRules' status (the
//     EvictionInProgress condition the controller wrote, and who wrote it);
//   - Metadata (who, what, when, the answer's code) for Lease and Event
//     writes, and for the other writes to pods and nodes and to the DRA
//     objects (ResourceSlices, ResourceClaims and their status,
//     DeviceTaintRules, DeviceClasses), whose times tell when an object or
//     a taint first existed;
//   - nothing for reads, nor for anything else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  verbs: ["get", "list", "watch"]
- level: Request
  resources:
  - group: ""
    resources: ["pods"]
  verbs: ["delete", "deletecollection"]
- level: Request
  resources:
  - group: ""
    resources: ["pods/eviction"]
  verbs: ["create"]
- level: Request
  resources:
  - group: ""
    resources: ["pods/status"]
  verbs: ["patch", "update"]
- level: Request
  resources:
  - group: "resource.k8s.io"
    resources: ["devicetaintrules/status"]
  verbs: ["patch", "update"]
- level: Metadata
  resources:
  - group: "resource.k8s.io"
    resources: ["resourceslices", "resourceclaims", "resourceclaims/status", "devicetaintrules", "deviceclasses"]
  - group: "coordination.k8s.io"
    resources: ["leases"]
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
  - group: ""
    resources: ["pods", "pods/binding", "nodes"]
- level: None
`

// auditReadsRule records pod and node reads, ahead of auditPolicy's rule
// that drops every read ([Options.AuditReads]).
const auditReadsRule = `- level: Metadata
  resources:
  - group: ""
    resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
`

// auditFlags writes the policy into dir and returns the kube-apiserver's
// flags for an audit log at logPath. blocking-strict writes each event
// before the server goes on, and refuses a request whose first event cannot
// be written: a write the server applied is on record, even if the server
// is killed right after.
func auditFlags(dir, logPath string, reads bool) ([]string, error) {
	text := auditPolicy
	if reads {
		text = strings.Replace(text, "rules:\n", "rules:\n"+auditReadsRule, 1)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking-strict",
		"--audit-log-maxsize=0", // never rotated: the oracle reads one file
	}, nil
}

// AuditLogPath returns the file of the API server's audit log: one JSON
// audit.k8s.io/v1 Event a line, appended to across restarts
// ([Env.KillAPIServer], [Env.StartAPIServer]). Its policy records pod
// deletes, pods/eviction creates, pods/status writes and DeviceTaintRules'
// status writes with their request bodies; Lease, Event, pod, node and DRA
// object writes without; no reads.
func (e *Env) AuditLogPath() string {
	return filepath.Join(e.dir, "audit.log")
}
