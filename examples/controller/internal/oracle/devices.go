package oracle

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deviceID names a device as an allocation result does.
type deviceID struct{ driver, pool, device string }

func (id deviceID) String() string { return id.driver + "/" + id.pool + "/" + id.device }

// allocated is a device allocated to a pod, with the tolerations its
// claim's request got.
type allocated struct {
	id          deviceID
	tolerations []resourcev1.DeviceToleration
}

// deviceTaint is a taint a device has in some state, and when its countdown
// starts.
type deviceTaint struct {
	taint   resourcev1.DeviceTaint
	rule    string    // the DeviceTaintRule's name; "" for a slice's taint
	start   time.Time // TimeAdded, or the first sight of a taint without one
	unknown bool      // start is a first sight
}

// deviceModel is the device half of the pods' deadlines, written from
// Kubernetes' rules for device taints and the controller's promises, not
// from taintkit's code:
//
//   - a pod's devices are those its ResourceClaims allocate (the claims
//     spec.resourceClaims names, directly or through
//     status.resourceClaimStatuses, and status.extendedResourceClaimStatus's),
//     counting a claim only while its status.reservedFor names the pod's UID;
//   - a device's taints are those of its entry in its pool's slices of the
//     newest generation, and the taint of each DeviceTaintRule that selects
//     it (a nil selector selects none; each field set must equal the
//     device's driver, pool or name) and that the guard does not hold;
//   - a toleration tolerates a taint as resourceclaim.ToleratesTaint says:
//     an empty key or effect matches any, Exists any value, Equal or ""
//     equal values;
//   - each NoExecute taint counts down from the later of its TimeAdded and
//     the pod's binding, for the smallest seconds of the tolerations that
//     tolerate it (negative as 0), for ever if one of them has no seconds,
//     not at all (due at its start) if none does;
//   - the guard holds a rule whose NoExecute taint would evict more pods
//     (of the checked namespace, bound, not gone, not tolerating it for
//     ever) than the limit: its taint then makes no pod due.
type deviceModel struct {
	hist   deviceHistory
	rules  []string               // the rules' names, sorted
	pools  map[[2]string][]string // the slices ever in each (driver, pool)
	held   []heldSpan
	times  []time.Time // every change of a slice, a rule or of what is held
	limits []maxPodsChange
}

func newDeviceModel(hist deviceHistory, pods map[types.UID][]podObs, namespace string, limits []maxPodsChange) *deviceModel {
	limits = slices.Clone(limits)
	slices.SortStableFunc(limits, func(a, b maxPodsChange) int { return a.at.Compare(b.at) })
	m := &deviceModel{hist: hist, pools: map[[2]string][]string{}, limits: limits}
	for name, list := range hist.slices {
		for _, o := range list {
			m.times = append(m.times, o.at)
			if o.obj == nil {
				continue
			}
			key := [2]string{o.obj.Spec.Driver, o.obj.Spec.Pool.Name}
			if !slices.Contains(m.pools[key], name) {
				m.pools[key] = append(m.pools[key], name)
			}
		}
	}
	for name, list := range hist.rules {
		m.rules = append(m.rules, name)
		for _, o := range list {
			m.times = append(m.times, o.at)
		}
	}
	slices.Sort(m.rules)
	m.computeHeld(pods, namespace)
	for _, h := range m.held {
		m.times = append(m.times, h.from)
		if !h.to.IsZero() {
			m.times = append(m.times, h.to)
		}
	}
	slices.SortFunc(m.times, time.Time.Compare)
	m.times = slices.Compact(m.times)
	return m
}

// claimNames returns the names of the claims pod uses.
func claimNames(pod *corev1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			names = append(names, *c.ResourceClaimName)
			continue
		}
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name == c.Name && s.ResourceClaimName != nil {
				names = append(names, *s.ResourceClaimName)
			}
		}
	}
	if e := pod.Status.ExtendedResourceClaimStatus; e != nil && e.ResourceClaimName != "" {
		names = append(names, e.ResourceClaimName)
	}
	return names
}

// usesClaims reports whether the pod names a claim in any of its states.
func usesClaims(list []podObs) bool {
	for _, o := range list {
		if len(o.pod.Spec.ResourceClaims) > 0 || o.pod.Status.ExtendedResourceClaimStatus != nil {
			return true
		}
	}
	return false
}

// claimTimes returns when the claims the pod names in any of its states
// changed.
func (m *deviceModel) claimTimes(list []podObs) []time.Time {
	var names []string
	for _, o := range list {
		for _, n := range claimNames(o.pod) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	var times []time.Time
	for _, n := range names {
		for _, o := range m.hist.claims[n] {
			times = append(times, o.at)
		}
	}
	return times
}

// allocatedAt returns the devices allocated to pod at t.
func (m *deviceModel) allocatedAt(pod *corev1.Pod, t time.Time) []allocated {
	var out []allocated
	for _, name := range claimNames(pod) {
		c := stateAt(m.hist.claims[name], t)
		if c == nil || c.Status.Allocation == nil || !slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
			return r.APIGroup == "" && r.Resource == "pods" && r.UID == pod.UID
		}) {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out = append(out, allocated{id: deviceID{r.Driver, r.Pool, r.Device}, tolerations: r.Tolerations})
		}
	}
	return out
}

// tolerates reports whether tol tolerates taint.
func tolerates(tol *resourcev1.DeviceToleration, taint *resourcev1.DeviceTaint) bool {
	if tol.Key != "" && tol.Key != taint.Key || tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	switch tol.Operator {
	case resourcev1.DeviceTolerationOpExists:
		return true
	case "", resourcev1.DeviceTolerationOpEqual:
		return tol.Value == taint.Value
	}
	return false
}

// toleration returns how long tols tolerate taint: forever, or for the
// smallest seconds (negative as 0) of those that tolerate it if matched,
// else not at all.
func toleration(tols []resourcev1.DeviceToleration, taint *resourcev1.DeviceTaint) (seconds int64, matched, forever bool) {
	for i := range tols {
		if !tolerates(&tols[i], taint) {
			continue
		}
		s := tols[i].TolerationSeconds
		if s == nil {
			return 0, true, true
		}
		if !matched || max(*s, 0) < seconds {
			seconds = max(*s, 0)
		}
		matched = true
	}
	return seconds, matched, false
}

// selects reports whether a DeviceTaintRule's selector selects id.
func selects(sel *resourcev1.DeviceTaintSelector, id deviceID) bool {
	return sel != nil && (sel.Driver == nil || *sel.Driver == id.driver) &&
		(sel.Pool == nil || *sel.Pool == id.pool) && (sel.Device == nil || *sel.Device == id.device)
}

// firstSight is when an object first had, in the stretch of its states that
// ends with the one at t, what has reports.
func firstSight[T any](list []obs[T], t time.Time, has func(*T) bool) time.Time {
	var first time.Time
	for _, o := range list {
		if o.at.After(t) {
			break
		}
		switch {
		case o.obj == nil || !has(o.obj):
			first = time.Time{}
		case first.IsZero():
			first = o.at
		}
	}
	return first
}

func sameTaint(a, b *resourcev1.DeviceTaint) bool {
	return a.Key == b.Key && a.Effect == b.Effect && a.TimeAdded == nil && b.TimeAdded == nil
}

// taintsAt returns the taints device id has at t.
func (m *deviceModel) taintsAt(id deviceID, t time.Time) []deviceTaint {
	var out []deviceTaint
	newest, present := int64(0), []*resourcev1.ResourceSlice{}
	for _, name := range m.pools[[2]string{id.driver, id.pool}] {
		if s := stateAt(m.hist.slices[name], t); s != nil && s.Spec.Driver == id.driver && s.Spec.Pool.Name == id.pool {
			present = append(present, s)
			newest = max(newest, s.Spec.Pool.Generation)
		}
	}
	for _, s := range present {
		if s.Spec.Pool.Generation != newest {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name != id.device {
				continue
			}
			for _, taint := range d.Taints {
				dt := deviceTaint{taint: taint}
				if taint.TimeAdded != nil {
					dt.start = taint.TimeAdded.Time
				} else {
					dt.unknown = true
					dt.start = firstSight(m.hist.slices[s.Name], t, func(s *resourcev1.ResourceSlice) bool {
						return slices.ContainsFunc(s.Spec.Devices, func(d resourcev1.Device) bool {
							return d.Name == id.device && slices.ContainsFunc(d.Taints, func(x resourcev1.DeviceTaint) bool { return sameTaint(&x, &taint) })
						})
					})
				}
				out = append(out, dt)
			}
		}
	}
	for _, name := range m.rules {
		list := m.hist.rules[name]
		r := stateAt(list, t)
		if r == nil || !selects(r.Spec.DeviceSelector, id) || m.heldAt(name, t) {
			continue
		}
		dt := deviceTaint{taint: r.Spec.Taint, rule: name}
		if r.Spec.Taint.TimeAdded != nil {
			dt.start = r.Spec.Taint.TimeAdded.Time
		} else {
			dt.unknown = true
			dt.start = firstSight(list, t, func(x *resourcev1.DeviceTaintRule) bool { return sameTaint(&x.Spec.Taint, &r.Spec.Taint) })
		}
		out = append(out, dt)
	}
	return out
}

// decide is the pod's device deadline at t, for a pod bound at bound
// (boundUnknown: a first sight).
func (m *deviceModel) decide(pod *corev1.Pod, bound time.Time, boundUnknown bool, t time.Time) due {
	var out due
	for _, a := range m.allocatedAt(pod, t) {
		for _, dt := range m.taintsAt(a.id, t) {
			if dt.taint.Effect != resourcev1.DeviceTaintEffectNoExecute {
				continue
			}
			seconds, _, forever := toleration(a.tolerations, &dt.taint)
			if forever {
				continue
			}
			start, unknown, hidden := dt.start, dt.unknown, time.Time{}
			if unknown {
				hidden = start
			}
			if bound.After(start) {
				start, unknown, hidden = bound, boundUnknown, time.Time{}
				if boundUnknown {
					hidden = bound
				}
			}
			at := start.Add(time.Duration(seconds) * time.Second)
			if out.at.IsZero() || at.Before(out.at) {
				out = due{at: at, taint: deviceTaintID(a.id, &dt), unknown: unknown, hidden: hidden}
			}
		}
	}
	return out
}

// deviceTaintID names a device's taint in a deadline; it never equals a
// node taint's taintID.
func deviceTaintID(id deviceID, dt *deviceTaint) string {
	from := "its slice"
	if dt.rule != "" {
		from = "rule " + dt.rule
	}
	return fmt.Sprintf("device %s %s:%s (%s)", id, dt.taint.Key, dt.taint.Effect, from)
}
