package oracle

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Tolerances of the checks (see the package doc).
const (
	// firstSightSlack is how far a first sight may be from the oracle's.
	firstSightSlack = time.Second
	// stillDueSlack is how long after a pod stopped being due a delete
	// already in flight may land.
	stillDueSlack = time.Second
	// lostBound is how long past its deadline a due pod may wait for its
	// deletionTimestamp with no fault active.
	lostBound = 2 * time.Second
	// faultBound is how long past a fault's end it may wait.
	faultBound = 5 * time.Second
)

// FaultWindow is a stretch of time in which a fault was active.
type FaultWindow struct {
	Name       string
	Start, End time.Time
	// Slowness, if not zero, makes it a fault that only slows requests: a
	// pod due in it may take Slowness longer than the usual 2 s, rather
	// than until the fault's end + 5 s.
	Slowness time.Duration
	// After, if not zero, replaces the 5 s a pod due in the fault may take
	// after its end.
	After time.Duration
}

// Eviction is a pod the controller removed, as the record shows it.
type Eviction struct {
	Namespace, Name string
	UID             types.UID
	Deadline        time.Time // the deadline computed from the history
	DueSince        time.Time // the later of Deadline and when the state that made it due was seen
	Deleted         time.Time // when the server answered the write that set deletionTimestamp
	Identity        string    // the replica that wrote it
	Fault           string    // the fault window the deadline fell in, if any
	Refused         int       // the controller's evictions of it a disruption budget refused (429)
	// Taint is the taint whose countdown ended at Deadline: "key:effect" of
	// a node taint, or "device driver/pool/name key:effect (its slice)" or
	// "(rule name)" of a device taint.
	Taint string
}

// Late is how long after it was due the pod was removed (negative when
// the controller saw the state that made it due before the oracle's watch).
func (e Eviction) Late() time.Duration { return e.Deleted.Sub(e.DueSince) }

// Transition is a replica's acquisition of the Lease: its first successful
// write of the Lease after another replica's.
type Transition struct {
	Identity string
	At       time.Time // when the server answered that write
}

// Report is the outcome of the checks.
type Report struct {
	Violations  []string
	Evictions   []Eviction
	Transitions []Transition
	// Writes counts the controller's writes checked (to pods and to
	// DeviceTaintRules' status), by kind.
	Writes map[Kind]int
	// Replicas are the identities seen writing.
	Replicas []string
	// LastWrite is when the server received each replica's last write to a
	// pod, by identity.
	LastWrite map[string]time.Time
	// Excused are the pods the controller said it gave up on
	// ([Oracle.Excuse]) that the check for lost pods would have flagged.
	Excused []string
	// Held are the due pods a disruption budget kept: the server refused
	// their eviction (429) before their bound.
	Held []string
	// AfterLost counts, for each delete or eviction whose answer was lost
	// ([Oracle.AnswerLost]), by audit ID, the controller's deletes and
	// evictions of the same pod after it: 0 when the controller saw the
	// write done.
	AfterLost map[string]int
	// HeldRules says when the guard held which DeviceTaintRule (its
	// NoExecute taint would evict more pods than the limit): its taint made
	// no pod due then.
	HeldRules []string
}

// input is everything the checks read.
type input struct {
	namespace string
	lease     string // namespace/name of the controller's Lease
	requests  []Request
	pods      map[types.UID][]podObs
	nodes     map[string][]nodeObs
	devices   deviceHistory
	maxPods   []maxPodsChange // the guard's limit over time (default DefaultRuleMaxPods)
	begin     time.Time       // requests before it are another test's
	end       time.Time       // the watches' end
	faults    []FaultWindow
	lost      map[string]bool      // audit IDs whose answers were lost
	excused   map[types.UID]bool   // pods the controller said it gave up
	started   map[string]time.Time // when replicas started watching, by identity
	agentUser string               // the controller's user; its writes must be attributed
	dryRun    bool                 // the controller must write to no pod
}

// podLife is one pod UID's history and what was written to it.
type podLife struct {
	uid       types.UID
	namespace string
	name      string
	segs      []segment
	// hidden is segs as a replica sees them whose watch a fault broke: a
	// taint gone and back within the fault never left. Never early
	// accepts either.
	hidden    []segment
	first     time.Time
	deletion  time.Time // first evidence of a deletionTimestamp; zero if none
	deleter   string    // the identity (or User-Agent) that set it
	byCtrl    bool
	writes    []Request // the controller's deletes and evictions, in order
	seenUntil time.Time
}

func check(in input) *Report {
	rep := &Report{Writes: map[Kind]int{}, LastWrite: map[string]time.Time{}, AfterLost: map[string]int{}}
	fail := func(format string, args ...any) {
		rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
	}

	dev := newDeviceModel(in.devices, in.pods, in.namespace, in.maxPods)
	rep.HeldRules = dev.heldRules()

	// The faults that may break the controller's watches (not those that
	// only slow requests).
	var blind []FaultWindow
	for _, f := range in.faults {
		if f.Slowness == 0 {
			blind = append(blind, f)
		}
	}
	// Pods by UID, and the UIDs each name had, in order.
	lives := map[types.UID]*podLife{}
	byName := map[string][]*podLife{}
	for uid, obs := range in.pods {
		p := obs[0].pod
		if p.Namespace != in.namespace {
			continue
		}
		l := &podLife{uid: uid, namespace: p.Namespace, name: p.Name, first: obs[0].at, segs: timeline(obs, in.nodes, dev, in.end, nil), seenUntil: in.end}
		if len(blind) > 0 {
			l.hidden = timeline(obs, in.nodes, dev, in.end, blind)
		}
		for _, o := range obs {
			if o.deleted || o.pod.DeletionTimestamp != nil {
				l.deletion, l.deleter = o.at, "(watch)"
				break
			}
		}
		lives[uid] = l
		byName[p.Name] = append(byName[p.Name], l)
	}
	for _, ls := range byName {
		slices.SortFunc(ls, func(a, b *podLife) int { return a.first.Compare(b.first) })
	}
	// lifeFor is the pod a write was for: the one its UID precondition
	// names, else the one under its name when it was received, as far as
	// the watch knows.
	lifeFor := func(r Request) *podLife {
		if r.UID != "" {
			if l, ok := lives[r.UID]; ok && l.name == r.Name {
				return l
			}
			return nil
		}
		// The last pod seen under the name by then; failing that (the
		// watch may lag the server), the first seen within a second after.
		var found *podLife
		for _, l := range byName[r.Name] {
			if !l.first.After(r.Received) {
				found = l
			} else if found == nil && !l.first.After(r.Received.Add(firstSightSlack)) {
				return l
			}
		}
		return found
	}

	// The Lease's writers over time: holder(t) is the last replica that
	// wrote it successfully at or before t.
	type leaseWrite struct {
		at       time.Time
		identity string
	}
	var leases []leaseWrite
	replicas := map[string]bool{}
	for _, r := range in.requests {
		if r.Received.Before(in.begin) || r.Kind != LeaseWrite || r.Namespace+"/"+r.Name != in.lease || !r.Applied() {
			continue
		}
		id := r.Identity
		if id == "" {
			id = r.UserAgent
		}
		if n := len(leases); n == 0 || leases[n-1].identity != id {
			rep.Transitions = append(rep.Transitions, Transition{Identity: id, At: r.Completed})
		}
		leases = append(leases, leaseWrite{at: r.Completed, identity: id})
	}
	holder := func(t time.Time) string {
		h := ""
		for _, w := range leases {
			if w.at.After(t) {
				break
			}
			h = w.identity
		}
		return h
	}

	for _, r := range in.requests {
		if r.Received.Before(in.begin) || r.Namespace != in.namespace {
			continue
		}
		switch r.Kind {
		case PodDelete, PodEvict, PodStatus, PodOther:
		default:
			continue
		}
		ctrl := r.Identity != ""
		if !ctrl {
			if r.User == in.agentUser {
				fail("unattributed write by the controller's user with User-Agent %q: %s", r.UserAgent, r)
			}
			// Another party's delete sets a deletionTimestamp too.
			if (r.Kind == PodDelete || r.Kind == PodEvict) && r.Applied() {
				if l := lifeFor(r); l != nil && (l.deletion.IsZero() || r.Completed.Before(l.deletion)) {
					l.deletion, l.deleter, l.byCtrl = r.Completed, r.UserAgent, false
				}
			}
			continue
		}
		replicas[r.Identity] = true
		rep.Writes[r.Kind]++
		rep.LastWrite[r.Identity] = r.Received
		if in.dryRun {
			fail("a dry run wrote to a pod: %s", r)
		}
		if r.Kind == PodOther {
			fail("the controller wrote to a pod other than by delete, eviction or status: %s", r)
			continue
		}
		if h := holder(r.Received); h != "" && h != r.Identity {
			fail("one writer: %s while %q held the Lease", r, h)
		}
		if r.UID == "" && (r.HasBody || r.Applied()) {
			// A request refused before its body was read (a 403 while a
			// restarted server's authorizer catches up) has none on record.
			fail("never twice: no UID precondition: %s", r)
		}
		l := lifeFor(r)
		if l == nil {
			fail("a write to a pod the watch never saw: %s", r)
			continue
		}
		if r.Kind == PodStatus {
			continue
		}
		switch {
		case !l.deletion.IsZero() && l.deletion.Before(r.Received):
			// Terminating already. After a write of its own, the check
			// below judges the repeat; after another's, the controller had
			// a second to see it.
			if len(l.writes) == 0 && l.deletion.Before(r.Received.Add(-stillDueSlack)) {
				fail("never twice: %s of a pod terminating since %s (%s)", r, l.deletion.Format("15:04:05.000"), l.deleter)
			}
		case !dueAround(l.segs, r.Received) && !dueAround(l.hidden, r.Received):
			fail("never early: %s before the pod was due (%s)", r, describe(l.segs))
		}
		l.writes = append(l.writes, r)
		// The first write on record that set the deletionTimestamp: one
		// that succeeded, or one the server never answered (killed) if the
		// watch then saw the pod terminating.
		at := time.Time{}
		switch {
		case r.Applied():
			at = r.Completed
		case r.Code == 0 && !l.deletion.IsZero() && !l.deletion.Before(r.Received):
			at = r.Received
		}
		if !at.IsZero() && (l.deletion.IsZero() || l.deleter == "(watch)" || at.Before(l.deletion)) {
			l.deletion, l.deleter, l.byCtrl = at, r.Identity, true
		}
	}

	uids := make([]types.UID, 0, len(lives))
	for uid := range lives {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return lives[uids[i]].first.Before(lives[uids[j]].first) })
	for _, uid := range uids {
		l := lives[uid]
		// Never twice: a write is repeated only after a refusal or a lost
		// answer.
		for i, w := range l.writes {
			if in.lost[w.AuditID] {
				rep.AfterLost[w.AuditID] = len(l.writes) - i - 1
			}
		}
		for i := 1; i < len(l.writes); i++ {
			prev := l.writes[i-1]
			if prev.Applied() && !in.lost[prev.AuditID] {
				fail("never twice: %s after %s, whose answer the server gave and no fault lost", l.writes[i], prev)
			}
		}
		checkLost(in, holder, l, rep, fail)
	}
	checkRuleStatus(in, holder, rep, fail)
	for id := range replicas {
		rep.Replicas = append(rep.Replicas, id)
	}
	sort.Strings(rep.Replicas)
	return rep
}

// dueAround reports whether a delete received at t is allowed: in some
// state within stillDueSlack (before) or firstSightSlack (after) of t, the
// pod's deadline was not after t (give or take a first sight's slack).
func dueAround(segs []segment, t time.Time) bool {
	lo, hi := t.Add(-stillDueSlack), t.Add(firstSightSlack)
	for _, s := range segs {
		if s.from.After(hi) || !s.to.After(lo) || s.c.at.IsZero() {
			continue
		}
		allow := s.c.at
		if s.c.unknown {
			allow = allow.Add(-firstSightSlack)
		}
		if !allow.After(t) {
			return true
		}
	}
	return false
}

// refused counts the controller's evictions of the pod that a disruption
// budget refused.
func refused(l *podLife) int {
	n := 0
	for _, w := range l.writes {
		if w.Kind == PodEvict && w.Code == 429 {
			n++
		}
	}
	return n
}

// checkLost checks that the pod, whenever it stayed due, got its
// deletionTimestamp in time, and records the controller's evictions.
func checkLost(in input, holder func(time.Time) string, l *podLife, rep *Report, fail func(string, ...any)) {
	if l.byCtrl {
		// Removed before it was seen due: within a first sight's slack
		// (never early has judged it). Its lateness is then negative.
		defer func() {
			for _, e := range rep.Evictions {
				if e.UID == l.uid {
					return
				}
			}
			for i := len(l.segs) - 1; i >= 0; i-- {
				if c := l.segs[i].c; !c.at.IsZero() {
					rep.Evictions = append(rep.Evictions, Eviction{Namespace: l.namespace, Name: l.name, UID: l.uid,
						Deadline: c.at, DueSince: c.at, Deleted: l.deletion, Identity: l.deleter, Refused: refused(l), Taint: c.taint})
					return
				}
			}
		}()
	}
	// runSince is when the pod became due, while it has stayed due since:
	// a state that keeps it due (any change of the pod, its node or its
	// devices) continues its wait, with the faults that it overlapped.
	var runSince time.Time
	for i, s := range l.segs {
		if s.c.at.IsZero() || !s.c.at.Before(s.to) {
			runSince = time.Time{}
			continue // not due in this state
		}
		dueSince := s.c.at
		if s.from.After(dueSince) {
			dueSince = s.from
		}
		if !runSince.IsZero() && !s.c.at.After(s.from) {
			dueSince = runSince
		}
		runSince = dueSince
		bound := dueSince.Add(lostBound)
		fault := ""
		for _, f := range in.faults {
			if f.Start.After(bound) || f.End.Before(dueSince) {
				continue
			}
			b := f.End.Add(faultBound)
			if f.After > 0 {
				b = f.End.Add(f.After)
			}
			if f.Slowness > 0 {
				b = dueSince.Add(lostBound + f.Slowness)
			}
			if b.After(bound) {
				bound, fault = b, f.Name
			}
		}
		if s.c.unknown {
			bound = bound.Add(firstSightSlack)
		}
		if !s.c.hidden.IsZero() {
			// A leader that started watching after the countdown's
			// unrecorded start counts it from its own first sight.
			if p, ok := in.started[holder(bound)]; ok && p.After(s.c.hidden) {
				bound = bound.Add(p.Sub(s.c.hidden) + firstSightSlack)
				fault = cmp.Or(fault, "a leader that started watching "+p.Format("15:04:05.000"))
			}
		}
		if !l.deletion.IsZero() && !l.deletion.After(bound) {
			if l.byCtrl {
				rep.Evictions = append(rep.Evictions, Eviction{
					Namespace: l.namespace, Name: l.name, UID: l.uid,
					Deadline: s.c.at, DueSince: dueSince, Deleted: l.deletion, Identity: l.deleter, Fault: fault,
					Refused: refused(l), Taint: s.c.taint,
				})
			}
			return
		}
		// Not removed by the bound: was it still due until then?
		stillDue := true
		for _, n := range l.segs[i:] {
			if n.from.After(bound) {
				break
			}
			if n.c.at.IsZero() || n.c.at.After(dueSince) && n.c.at.After(n.from) {
				stillDue = false
				break
			}
		}
		if !stillDue {
			continue
		}
		if bound.After(l.seenUntil) {
			return // the test ended first: nothing to say
		}
		if in.dryRun {
			return // nothing is removed
		}
		for _, w := range l.writes {
			if w.Kind == PodEvict && w.Code == 429 && !w.Received.After(bound) {
				rep.Held = append(rep.Held, fmt.Sprintf("%s/%s (uid %s), due since %s, refused at %s",
					l.namespace, l.name, l.uid, dueSince.Format("15:04:05.000"), w.Received.Format("15:04:05.000")))
				return
			}
		}
		if in.excused[l.uid] {
			rep.Excused = append(rep.Excused, fmt.Sprintf("%s/%s (uid %s), due since %s", l.namespace, l.name, l.uid, dueSince.Format("15:04:05.000")))
			return
		}
		got := "never"
		if !l.deletion.IsZero() {
			got = fmt.Sprintf("at %s (%v late, by %s)", l.deletion.Format("15:04:05.000"), l.deletion.Sub(bound).Round(time.Millisecond), l.deleter)
		}
		fail("never lost: pod %s/%s (uid %s) due since %s (deadline %s%s) had no deletionTimestamp by %s: %s",
			l.namespace, l.name, l.uid, dueSince.Format("15:04:05.000"), s.c.at.Format("15:04:05.000"), faultNote(fault),
			bound.Format("15:04:05.000"), got)
		return
	}
}

func faultNote(f string) string {
	if f == "" {
		return ""
	}
	return ", during fault " + f
}

// describe says what the pod's deadlines were, for a violation's message.
func describe(segs []segment) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteString("; ")
		}
		at := "not due"
		if !s.c.at.IsZero() {
			at = "due at " + s.c.at.Format("15:04:05.000")
			if s.c.unknown {
				at += " (±1 s)"
			}
		}
		fmt.Fprintf(&b, "from %s %s", s.from.Format("15:04:05.000"), at)
	}
	return b.String()
}
