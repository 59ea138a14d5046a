package soak_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/controller/app"
	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
)

// Fault kinds.
const (
	faultLeaderKill = "leader SIGKILL"
	faultAPIServer  = "API server restart"
	faultAdmission  = "admission refuses deletions"
)

// plannedFault is a fault the schedule holds, at an offset from the soak's
// start.
type plannedFault struct {
	kind string
	at   time.Duration
}

// schedule plans the faults of a soak of duration d: a leader kill every
// killEvery (3 minutes unless TAINTKIT_SOAK_KILL_EVERY says otherwise) and
// an API server restart every restartEvery, the first of
// each kind early enough that a short soak has one (at a quarter and at
// just past half of it), each jittered by up to a sixth of its spacing,
// none in the last 30 s (the churn's end), and no two within 45 s of each
// other (the later one moves).
func schedule(d, killEvery time.Duration, rng *rand.Rand) []plannedFault {
	const restartEvery, apart = 10 * time.Minute, 45 * time.Second
	var plan []plannedFault
	add := func(kind string, first, every time.Duration) {
		spread := min(first, every) / 3
		for at := first; at < d-time.Minute; at += every {
			jitter := time.Duration(rng.Int64N(int64(spread))) - spread/2
			plan = append(plan, plannedFault{kind, max(30*time.Second, at+jitter)})
		}
	}
	add(faultLeaderKill, min(killEvery, d/4), killEvery)
	add(faultAPIServer, min(restartEvery, d*11/20), restartEvery)
	slices.SortFunc(plan, func(a, b plannedFault) int { return int(a.at - b.at) })
	for i := 1; i < len(plan); i++ {
		if plan[i].at < plan[i-1].at+apart {
			plan[i].at = plan[i-1].at + apart
		}
	}
	return slices.DeleteFunc(plan, func(f plannedFault) bool { return f.at >= d-30*time.Second })
}

// TestSchedule: whatever the seed, a soak of 5 minutes or more has a leader
// kill and an API server restart, none in its last 30 s, none within 45 s
// of another, both still there after the waits for warm standbys
// (warmUp); an hour has a kill every few minutes and a restart every ten.
func TestSchedule(t *testing.T) {
	for seed := range uint64(200) {
		for _, d := range []time.Duration{5 * time.Minute, 10 * time.Minute, 60 * time.Minute} {
			plan := schedule(d, defaultKillEvery, rand.New(rand.NewPCG(seed, 0)))
			kinds := map[string]int{}
			for i, f := range plan {
				kinds[f.kind]++
				if f.at >= d-30*time.Second || f.at < 30*time.Second {
					t.Fatalf("seed %d, %v: %s at %v", seed, d, f.kind, f.at)
				}
				if i > 0 && f.at-plan[i-1].at < 45*time.Second {
					t.Fatalf("seed %d, %v: faults at %v and %v", seed, d, plan[i-1].at, f.at)
				}
			}
			if kinds[faultLeaderKill] == 0 || kinds[faultAPIServer] == 0 {
				t.Fatalf("seed %d, %v: %v", seed, d, plan)
			}
			// The injector waits for warm standbys: at worst every fault
			// leaves a replica started afresh, and the next waits warmUp
			// for it. Both kinds must still come before the last 30 s.
			injected, fresh := map[string]int{}, time.Duration(-1)
			for _, f := range plan {
				at := f.at
				if fresh >= 0 {
					at = max(at, fresh+restartDelay+warmUp)
				}
				if at > d-30*time.Second {
					break
				}
				injected[f.kind]++
				fresh = at
			}
			if injected[faultLeaderKill] == 0 || injected[faultAPIServer] == 0 {
				t.Fatalf("seed %d, %v: after the warm-up waits only %v of %v", seed, d, injected, plan)
			}
			if d == 60*time.Minute && (kinds[faultLeaderKill] < 15 || kinds[faultAPIServer] != 5) {
				t.Fatalf("seed %d, an hour: %v", seed, kinds)
			}
		}
	}
}

// faultRecord is a fault injected and how long the controller took to
// recover from it.
type faultRecord struct {
	kind      string
	at        time.Time
	down      time.Duration // the API server's time away (restarts)
	recovered time.Duration // from the fault to a leader acting again
	detail    string
}

// faultSettle is how long after a fault's recovery its effects (a replica
// restarting, reviews failing) are still excused.
const faultSettle = 30 * time.Second

// duringFault reports whether at falls in a fault or its settling time.
func duringFault(faults []faultRecord, at time.Time) bool {
	for _, f := range faults {
		if !at.Before(f.at) && at.Before(f.at.Add(f.recovered+faultSettle)) {
			return true
		}
	}
	return false
}

// injector injects the planned faults.
type injector struct {
	env      *testenv.Env
	c        kubernetes.Interface
	sa       *rest.Config
	ns       string
	oracle   *oracle.Oracle
	killable []*replica
	survivor *replica
	rng      *rand.Rand
	last     time.Time // no fault after this: the churn's last 30 s
}

// run injects plan's faults at their offsets from begin until ctx ends,
// and returns what it did.
func (in *injector) run(ctx context.Context, begin time.Time, plan []plannedFault, logf func(string, ...any)) []faultRecord {
	var done []faultRecord
	for i, f := range plan {
		select {
		case <-ctx.Done():
			return done
		case <-time.After(time.Until(begin.Add(f.at))):
		}
		if !in.waitWarm(ctx, begin) {
			logf("fault %d (%s at %v) skipped: no replica that may take over has watched for %v before the churn's end", i+1, f.kind, f.at, warmUp)
			continue
		}
		var rec faultRecord
		var err error
		switch f.kind {
		case faultLeaderKill:
			rec, err = in.killLeader(ctx)
		case faultAPIServer:
			rec, err = in.restartAPIServer(ctx)
		}
		if err != nil {
			logf("fault %d (%s at %v): %v", i+1, f.kind, f.at, err)
			rec.detail = "failed: " + err.Error()
		} else {
			logf("fault %d: %s at %v: recovered in %v %s", i+1, f.kind, rec.at.Sub(begin).Round(time.Second),
				rec.recovered.Round(time.Millisecond), rec.detail)
		}
		done = append(done, rec)
	}
	return done
}

// warmUp is how long a replica that may take over must have watched the
// cluster before a fault: longer than any countdown the churn starts (90 s)
// and a disruption budget's fallback (30 s). A standby keeps the deadlines
// of countdowns whose starts its objects do not record (untimed taints,
// taints refreshed in place) from its own first sight; a process that
// started after such a countdown began cannot know it did (the README says
// so), and would end it late. The soak tests takeovers by warm standbys.
const warmUp = 2 * time.Minute

// waitWarm waits until every killable replica's run has watched the cluster
// since the churn began (at begin) or for warmUp, and reports whether that
// came before the churn's last 30 s (in.last) and ctx's end.
func (in *injector) waitWarm(ctx context.Context, begin time.Time) bool {
	for {
		ready := time.Now()
		for _, r := range in.killable {
			since := r.Since()
			switch {
			case since.IsZero(): // between runs: the next starts within a second
				ready = later(ready, time.Now().Add(restartDelay+warmUp))
			case since.After(begin):
				ready = later(ready, since.Add(warmUp))
			}
		}
		if ready.After(in.last) {
			return false
		}
		if !ready.After(time.Now()) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(ready)):
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// leaseHolder reads the controller's Lease.
func (in *injector) lease(ctx context.Context) (*coordinationv1.Lease, error) {
	return in.c.CoordinationV1().Leases("kube-system").Get(ctx, "taintkit-noexecute", metav1.GetOptions{})
}

// pollInterval is how often the injector reads the Lease while it waits.
const pollInterval = 100 * time.Millisecond

// waitLease reads the Lease every pollInterval until cond holds for it (or
// ctx ends), and returns when it first did.
func (in *injector) waitLease(ctx context.Context, cond func(*coordinationv1.Lease) bool) (time.Time, error) {
	for {
		l, err := in.lease(ctx)
		if err == nil && cond(l) {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for the Lease (last error %v): %w", err, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// killLeader sends SIGKILL to the replica that holds the Lease, unless it
// is the survivor, and waits for another to take it.
func (in *injector) killLeader(ctx context.Context) (faultRecord, error) {
	rec := faultRecord{kind: faultLeaderKill, at: time.Now()}
	l, err := in.lease(ctx)
	if err != nil {
		return rec, err
	}
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	if holder == in.survivor.Identity() {
		rec.detail = "skipped: the survivor leads"
		return rec, nil
	}
	i := slices.IndexFunc(in.killable, func(r *replica) bool { return r.Identity() == holder })
	if i < 0 {
		return rec, fmt.Errorf("the Lease's holder %q is no running replica", holder)
	}
	victim := in.killable[i]
	killed, err := victim.kill()
	if err != nil {
		return rec, err
	}
	rec.at = killed
	// Waited for even if the soak's time runs out meanwhile.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	next := ""
	took, err := in.waitLease(wctx, func(l *coordinationv1.Lease) bool {
		next = ptr.Deref(l.Spec.HolderIdentity, "")
		return next != "" && next != holder
	})
	if err != nil {
		return rec, err
	}
	rec.recovered = took.Sub(rec.at)
	rec.detail = fmt.Sprintf("(%s killed, %s took the Lease)", holder, next)
	in.oracle.Fault(fmt.Sprintf("%s %s", faultLeaderKill, rec.at.Format("15:04:05")), rec.at, took)
	return rec, nil
}

// restartAPIServer kills the API server, starts it again after 1–5 s, and
// waits until a leader has written the Lease after the server authorized
// the controller again.
func (in *injector) restartAPIServer(ctx context.Context) (faultRecord, error) {
	rec := faultRecord{kind: faultAPIServer, at: time.Now()}
	away := time.Duration(1000+in.rng.IntN(4000)) * time.Millisecond
	if err := in.env.KillAPIServer(); err != nil {
		return rec, err
	}
	select {
	case <-ctx.Done():
	case <-time.After(away):
	}
	// Started again even if ctx has ended: the soak's end needs it.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := in.env.StartAPIServer(sctx); err != nil {
		return rec, err
	}
	// Its RBAC authorizer fills its cache after /readyz; until then it
	// refuses the ServiceAccount.
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "taintkit-noexecute"},
		{Verb: "delete", Resource: "pods", Namespace: in.ns},
		{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: in.ns},
	} {
		if err := testenv.WaitForAccess(sctx, in.sa, attrs); err != nil {
			return rec, err
		}
	}
	serving := time.Now()
	rec.down = serving.Sub(rec.at)
	leading, err := in.waitLease(sctx, func(l *coordinationv1.Lease) bool {
		return ptr.Deref(l.Spec.HolderIdentity, "") != "" && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(serving)
	})
	if err != nil {
		return rec, err
	}
	rec.recovered = leading.Sub(rec.at)
	rec.detail = fmt.Sprintf("(away %v, serving the controller again after %v)", away, rec.down.Round(time.Millisecond))
	in.oracle.Fault(fmt.Sprintf("%s %s", faultAPIServer, rec.at.Format("15:04:05")), rec.at, leading)
	return rec, nil
}

// admissionHold is how long the admission fault refuses deletions.
const admissionHold = 45 * time.Second

// refuseDeletions is the admission fault: at begin+at, for admissionHold, a
// ValidatingAdmissionPolicy refuses (403) the controller's deletes and
// evictions of the namespace's pods whose names end in a digit chosen at
// random (a tenth of them): a policy being rolled out, a webhook that is
// down. The churn's own writes are not refused. Every eviction refused must
// go through at its next retry after the policy goes, within the retry
// policy's longest wait.
func (in *injector) refuseDeletions(ctx context.Context, begin time.Time, at time.Duration, logf func(string, ...any)) (faultRecord, bool) {
	select {
	case <-ctx.Done():
		return faultRecord{}, false
	case <-time.After(time.Until(begin.Add(at))):
	}
	digit := in.rng.IntN(10)
	name := in.ns + "-refuse-deletions"
	rec := faultRecord{kind: faultAdmission, at: time.Now(), detail: fmt.Sprintf("(pods ending in %d, for %v)", digit, admissionHold)}
	policies := in.c.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := in.c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	_, err := policies.Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete, admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods", "pods/eviction"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!(request.userInfo.username == 'system:serviceaccount:kube-system:taintkit-noexecute' && "+
					"(request.operation == 'DELETE' || request.subResource == 'eviction') && has(request.name) && request.name.endsWith('%d'))", digit),
				Reason:  ptr.To(metav1.StatusReasonForbidden),
				Message: "held by the soak's admission fault",
			}},
		},
	}, metav1.CreateOptions{})
	if err == nil {
		_, err = bindings.Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        name,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
				MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": in.ns},
				}},
			},
		}, metav1.CreateOptions{})
	}
	select {
	case <-ctx.Done():
	case <-time.After(admissionHold):
	}
	// Removed even if ctx has ended, and even if an API server restart
	// made a create fail: the soak's end must not meet the policy.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	for _, del := range []func() error{
		func() error { return bindings.Delete(rctx, name, metav1.DeleteOptions{}) },
		func() error { return policies.Delete(rctx, name, metav1.DeleteOptions{}) },
	} {
		for {
			derr := del()
			if derr == nil || apierrors.IsNotFound(derr) || rctx.Err() != nil {
				break
			}
			time.Sleep(time.Second) // the API server may be restarting
		}
	}
	// The server's caches of policies follow the deletes within a second or
	// two; the retry policy's longest wait follows that.
	end := time.Now().Add(2 * time.Second)
	rec.recovered = end.Sub(rec.at)
	if err != nil {
		rec.detail = "failed: " + err.Error()
	} else if reqs, aerr := oracle.ReadAudit(in.env.AuditLogPath()); aerr == nil {
		refused := 0
		for _, r := range reqs {
			if r.Identity != "" && r.Code == 403 && (r.Kind == oracle.PodDelete || r.Kind == oracle.PodEvict) &&
				!r.Received.Before(rec.at) && r.Received.Before(end) {
				refused++
			}
		}
		rec.detail = fmt.Sprintf("(pods ending in %d, for %v: %d deletions refused)", digit, admissionHold, refused)
		if refused == 0 {
			rec.detail = "failed: no deletion was refused: the fault did not exercise the controller"
		}
	}
	in.oracle.FaultWithin(fmt.Sprintf("%s %s", faultAdmission, rec.at.Format("15:04:05")), rec.at, end, app.DefaultEvictionRetryMaxBackoff+5*time.Second)
	logf("fault: %s at %v %s", faultAdmission, rec.at.Sub(begin).Round(time.Second), rec.detail)
	return rec, true
}
