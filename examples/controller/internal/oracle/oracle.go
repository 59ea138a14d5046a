package oracle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Options configures [Start].
type Options struct {
	// Client is an administrator's client: the watches use it.
	Client kubernetes.Interface
	// AuditLog is the path of the API server's audit log
	// (testenv.Env.AuditLogPath).
	AuditLog string
	// Namespace is where the pods to check are.
	Namespace string
	// Lease is the controller's Lease as namespace/name. Empty means
	// kube-system/taintkit-noexecute.
	Lease string
	// ControllerUser is the user the controller acts as: a pod write of its
	// with another User-Agent than the controller's is a violation. Empty
	// means system:serviceaccount:kube-system:taintkit-noexecute.
	ControllerUser string
}

// Oracle watches the pods of one namespace and every node from [Start] on,
// and checks the controller's writes against them when asked. Its methods
// are safe for concurrent use by multiple goroutines.
type Oracle struct {
	opts  Options
	begin time.Time
	hist  *history
	stop  context.CancelFunc
	done  <-chan struct{}

	mu      sync.Mutex
	faults  []FaultWindow
	lost    map[string]bool
	excused map[types.UID]bool
	started map[string]time.Time
	dryRun  bool
	maxPods []maxPodsChange
}

// Start starts watching and returns once the watches have listed. Start it
// before the pods, their nodes, their DRA objects and the controller, so
// that it sees every first sight the controller does. The API server must
// serve ResourceSlices, ResourceClaims and DeviceTaintRules in
// resource.k8s.io/v1, as Kubernetes 1.37 does by default.
func Start(ctx context.Context, opts Options) (*Oracle, error) {
	if opts.Lease == "" {
		opts.Lease = "kube-system/taintkit-noexecute"
	}
	if opts.ControllerUser == "" {
		opts.ControllerUser = "system:serviceaccount:kube-system:taintkit-noexecute"
	}
	o := &Oracle{opts: opts, begin: time.Now(), hist: newHistory(), lost: map[string]bool{}, excused: map[types.UID]bool{}, started: map[string]time.Time{}}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o.stop = cancel
	done, err := o.hist.watch(runCtx, opts.Client, opts.Namespace)
	o.done = done
	if err != nil {
		cancel()
		<-done
		return nil, err
	}
	return o, nil
}

// Started records that the replica with identity started watching at at.
// It cannot know the countdown starts the objects do not record from
// before then (a taint's or a pod's first sight, the first TimeAdded of a
// taint refreshed in place): as leader it counts them from what it saw
// first, so a pod whose countdown started so may go as much later. A
// replica not recorded is taken to have watched from the start.
func (o *Oracle) Started(identity string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started[identity] = at
}

// Fault records that a fault was active from start to end: a pod due then
// may get its deletionTimestamp as late as end + 5 s.
func (o *Oracle) Fault(name string, start, end time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.faults = append(o.faults, FaultWindow{Name: name, Start: start, End: end})
}

// FaultWithin is Fault with a bound of its own: a pod due while the fault
// was active may get its deletionTimestamp as late as end + after. A test
// that states a looser bound than 5 s says why.
func (o *Oracle) FaultWithin(name string, start, end time.Time, after time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.faults = append(o.faults, FaultWindow{Name: name, Start: start, End: end, After: after})
}

// Slow records that requests were slowed from start to end: a pod due then
// may get its deletionTimestamp as late as its deadline + 2 s + slowness.
func (o *Oracle) Slow(name string, start, end time.Time, slowness time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.faults = append(o.faults, FaultWindow{Name: name, Start: start, End: end, Slowness: slowness})
}

// AnswerLost records that the answer to the request with this audit ID
// (the Audit-Id header of the server's response) never reached the
// controller: repeating that request is no violation.
func (o *Oracle) AnswerLost(auditID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lost[auditID] = true
}

// Excuse records that the controller reported giving up the eviction of the
// pod uid (its retries ran out): the pod staying is then reported in
// [Report].Excused, not as a violation.
func (o *Oracle) Excuse(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.excused[uid] = true
}

// DryRun records that the controller runs with --dry-run: any write of its
// to a pod is a violation, and no due pod is expected to go.
func (o *Oracle) DryRun() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dryRun = true
}

// RuleMaxPods records that from at on the controller runs with
// --device-taint-rule-max-pods=n (0: no limit). Until the first call the
// checks assume the flag's default, [DefaultRuleMaxPods]. The checks compute
// which DeviceTaintRules the guard holds from the watched objects and the
// limit, not from the rules' status: a pod due only through a held rule's
// taint is not due (evicting it is early, keeping it is no loss), and
// [Report].HeldRules says when each was held.
func (o *Oracle) RuleMaxPods(at time.Time, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.maxPods = append(o.maxPods, maxPodsChange{at: at, n: n})
}

// EndWatch stops the watches now (Check does, if EndWatch was not called):
// a test that stops its controller before it calls Check ends the record
// first, so that a pod falling due while the controller shuts down is not
// taken for lost. The controller's writes after it are still checked
// against the history up to it.
func (o *Oracle) EndWatch() {
	o.stop()
	<-o.done
	o.hist.mu.Lock()
	defer o.hist.mu.Unlock()
	if o.hist.end.IsZero() {
		o.hist.end = time.Now()
	}
}

// Check stops the watches (at the first call), reads the audit log and
// returns the checks' report. Call it once the test has waited for what it
// expects: a pod whose bound is after the watches' end is not checked for
// being lost.
func (o *Oracle) Check() (*Report, error) {
	o.EndWatch()
	requests, err := readAudit(o.opts.AuditLog)
	if err != nil {
		return nil, err
	}
	pods, nodes, devices, end := o.hist.snapshot()
	o.mu.Lock()
	in := input{
		namespace: o.opts.Namespace,
		lease:     o.opts.Lease,
		requests:  requests,
		pods:      pods,
		nodes:     nodes,
		devices:   devices,
		maxPods:   slices.Clone(o.maxPods),
		begin:     o.begin,
		end:       end,
		faults:    slices.Clone(o.faults),
		lost:      o.lost,
		excused:   o.excused,
		started:   o.started,
		agentUser: o.opts.ControllerUser,
		dryRun:    o.dryRun,
	}
	rep := check(in)
	o.mu.Unlock()
	return rep, nil
}

// Verify is Check for a test: it fails t for each violation (and an error),
// logs a summary, and returns the report.
func (o *Oracle) Verify(t testing.TB) *Report {
	t.Helper()
	rep, err := o.Check()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("oracle: %s", v)
	}
	t.Log(rep.Summary())
	return rep
}

// Summary says in a few lines what was checked and measured.
func (r *Report) Summary() string {
	late := make([]time.Duration, 0, len(r.Evictions))
	for _, e := range r.Evictions {
		late = append(late, e.Late())
	}
	slices.Sort(late)
	s := fmt.Sprintf("oracle: %d violations; controller's pod writes %v by %v; %d pods removed by it",
		len(r.Violations), r.Writes, r.Replicas, len(r.Evictions))
	if n := len(late); n > 0 {
		s += fmt.Sprintf(", removed after due: min %v, median %v, max %v",
			late[0].Round(time.Millisecond), late[n/2].Round(time.Millisecond), late[n-1].Round(time.Millisecond))
	}
	for _, tr := range r.Transitions {
		s += fmt.Sprintf("; Lease written by %s from %s", tr.Identity, tr.At.Format("15:04:05.000"))
	}
	if len(r.Held) > 0 {
		s += fmt.Sprintf("; held by a disruption budget: %d", len(r.Held))
	}
	if len(r.HeldRules) > 0 {
		s += "; " + strings.Join(r.HeldRules, "; ")
	}
	if len(r.Excused) > 0 {
		s += fmt.Sprintf("; excused (the controller reported giving up): %v", r.Excused)
	}
	return s
}
