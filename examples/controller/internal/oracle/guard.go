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
// taint would evict.
func (m *deviceModel) computeHeld(pods map[types.UID][]podObs, namespace string) {
	var users [][]podObs
	var times []time.Time
	for _, list := range pods {
		if list[0].pod.Namespace != namespace || !usesClaims(list) {
			continue
		}
		users = append(users, list)
		for _, o := range list {
			times = append(times, o.at)
		}
		times = append(times, m.claimTimes(list)...)
	}
	if len(m.hist.rules) == 0 {
		return
	}
	for _, list := range m.hist.rules {
		for _, o := range list {
			times = append(times, o.at)
		}
	}
	for _, c := range m.limits {
		times = append(times, c.at)
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.Compact(times)
	open := map[string]int{} // index in m.held of each rule's open span
	for _, t := range times {
		limit := m.limitAt(t)
		for _, name := range m.rules {
			n := 0
			if r := stateAt(m.hist.rules[name], t); r != nil && r.Spec.Taint.Effect == resourcev1.DeviceTaintEffectNoExecute {
				n = m.wouldEvict(r, users, t)
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

// wouldEvict counts the pods at t (bound, terminating or not: a pod leaves
// the count when it is gone) with a device r selects whose tolerations do
// not tolerate r's taint for ever. A controller whose guard is off evicts
// them all at once: each stays in the count until the server removes it,
// so each of those evictions is early.
func (m *deviceModel) wouldEvict(r *resourcev1.DeviceTaintRule, users [][]podObs, t time.Time) int {
	n := 0
	for _, list := range users {
		var p *podObs
		for i := range list {
			if list[i].at.After(t) {
				break
			}
			p = &list[i]
		}
		if p == nil || p.deleted || p.pod.Spec.NodeName == "" {
			continue
		}
		if slices.ContainsFunc(m.allocatedAt(p.pod, t), func(a allocated) bool {
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
