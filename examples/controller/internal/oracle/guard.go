package oracle

import (
	"fmt"
	"slices"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultRuleMaxPods is the controller's --device-taint-rule-max-pods
// default: the limit the checks assume until [Oracle.RuleMaxPods] says
// otherwise.
const DefaultRuleMaxPods = 100

// maxPodsChange is a limit of the guard on DeviceTaintRules, from at on.
type maxPodsChange struct {
	at time.Time
	n  int // 0: no limit
}

// heldSpan is a stretch in which the guard holds a rule: its NoExecute taint
// would evict more pods than the limit.
type heldSpan struct {
	rule     string
	from, to time.Time // to zero: until the record's end
	pods     int       // the pods its taint would evict when it was first held
	limit    int
}

// limitAt is the guard's limit at t.
func (m *deviceModel) limitAt(t time.Time) int {
	n := DefaultRuleMaxPods
	for _, c := range m.limits {
		if !c.at.After(t) {
			n = c.n
		}
	}
	return n
}

// heldAt reports whether the guard holds the rule at t.
func (m *deviceModel) heldAt(rule string, t time.Time) bool {
	for _, h := range m.held {
		if h.rule == rule && !h.from.After(t) && (h.to.IsZero() || h.to.After(t)) {
			return true
		}
	}
	return false
}

// computeHeld finds when each rule is held: at every change of a pod, a
// claim, a rule or the limit, it counts the pods each rule's NoExecute
// taint would evict (wouldEvict).
func (m *deviceModel) computeHeld(pods map[types.UID][]podObs, namespace string) {
	if len(m.rules) == 0 {
		return
	}
	// A change at at, of the user (a pod that names a claim) at index
	// user, or of a rule or the limit (-1).
	type change struct {
		at   time.Time
		user int
	}
	var users [][]podObs
	var changes []change
	for _, list := range pods {
		if list[0].pod.Namespace != namespace || !usesClaims(list) {
			continue
		}
		for _, o := range list {
			changes = append(changes, change{o.at, len(users)})
		}
		for _, t := range m.claimTimes(list) {
			changes = append(changes, change{t, len(users)})
		}
		users = append(users, list)
	}
	for _, list := range m.hist.rules {
		for _, o := range list {
			changes = append(changes, change{o.at, -1})
		}
	}
	for _, c := range m.limits {
		changes = append(changes, change{c.at, -1})
	}
	slices.SortFunc(changes, func(a, b change) int { return a.at.Compare(b.at) })
	// Each user's devices now, if it counts (bound, not gone).
	devices := make([][]allocated, len(users))
	open := map[string]int{} // index in m.held of each rule's open span
	for k := 0; k < len(changes); {
		t := changes[k].at
		for ; k < len(changes) && changes[k].at.Equal(t); k++ {
			if u := changes[k].user; u >= 0 {
				devices[u] = nil
				if p := podAt(users[u], t); p != nil && !p.deleted && p.pod.Spec.NodeName != "" {
					devices[u] = m.allocatedAt(p.pod, t)
				}
			}
		}
		limit := m.limitAt(t)
		for _, name := range m.rules {
			n := 0
			if r := stateAt(m.hist.rules[name], t); r != nil && r.Spec.Taint.Effect == resourcev1.DeviceTaintEffectNoExecute {
				n = wouldEvict(r, devices)
			}
			i, isOpen := open[name]
			switch held := limit > 0 && n > limit; {
			case held && !isOpen:
				open[name] = len(m.held)
				m.held = append(m.held, heldSpan{rule: name, from: t, pods: n, limit: limit})
			case !held && isOpen:
				m.held[i].to = t
				delete(open, name)
			}
		}
	}
}

// podAt returns the pod's last state delivered at or before t, if any.
func podAt(list []podObs, t time.Time) *podObs {
	var p *podObs
	for i := range list {
		if list[i].at.After(t) {
			break
		}
		p = &list[i]
	}
	return p
}

// wouldEvict counts the pods, given by their devices (nil for a pod not
// bound, or gone; a terminating pod counts until it is gone), with a device
// r selects whose tolerations do not tolerate r's taint for ever. A
// controller whose guard is off evicts them all at once: each stays in the
// count until the server removes it, so each of those evictions is early.
func wouldEvict(r *resourcev1.DeviceTaintRule, devices [][]allocated) int {
	n := 0
	for _, d := range devices {
		if slices.ContainsFunc(d, func(a allocated) bool {
			_, _, forever := toleration(a.tolerations, &r.Spec.Taint)
			return selects(r.Spec.DeviceSelector, a.id) && !forever
		}) {
			n++
		}
	}
	return n
}

// heldRules says when the guard held which rule, for the report.
func (m *deviceModel) heldRules() []string {
	var out []string
	for _, h := range m.held {
		to := "the end"
		if !h.to.IsZero() {
			to = h.to.Format("15:04:05.000")
		}
		out = append(out, fmt.Sprintf("rule %s held from %s (%d pods over a limit of %d) to %s",
			h.rule, h.from.Format("15:04:05.000"), h.pods, h.limit, to))
	}
	return out
}

// checkRuleStatus checks the controller's writes of DeviceTaintRules'
// status: one writer, as for pods.
func checkRuleStatus(in input, holder func(time.Time) string, rep *Report, fail func(string, ...any)) {
	for _, r := range in.requests {
		if r.Received.Before(in.begin) || r.Kind != RuleStatus {
			continue
		}
		if r.Identity == "" {
			if r.User == in.agentUser {
				fail("unattributed write by the controller's user with User-Agent %q: %s", r.UserAgent, r)
			}
			continue
		}
		rep.Writes[r.Kind]++
		if h := holder(r.Received); h != "" && h != r.Identity {
			fail("one writer: %s while %q held the Lease", r, h)
		}
	}
}
