package devicetaints

import (
	"cmp"
	"slices"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/taintkit/taintkit/tolerations"
)

// Tracker holds a cluster's device taints, as Kubernetes reads them: those
// of the devices in ResourceSlices, a pool's newest generation only (older
// slices of a pool are being replaced), and those each DeviceTaintRule puts
// on the devices it selects ([RuleSelects]), unless the rule is held
// ([Tracker.Hold]). Feed it every add, update and delete of a
// ResourceSlice and a DeviceTaintRule; [Tracker.Taints] then says what
// taints a device has, for the tolerations.Device of a pod's allocation.
//
// It is safe for concurrent use by multiple goroutines. It keeps the slices
// and rules it is given, which the caller must not modify afterwards (an
// informer's objects are not). The zero value is not usable; call [New].
type Tracker struct {
	mu    sync.RWMutex
	pools map[poolID]*devicePool
	pool  map[string]poolID // each slice's pool, by slice name
	rules map[string]*resourcev1.DeviceTaintRule
	held  map[string]bool
}

type poolID struct{ driver, pool string }

// devicePool is a pool's slices by name, and the newest generation of them.
type devicePool struct {
	slices     map[string]*resourcev1.ResourceSlice
	generation int64
}

// New returns an empty Tracker.
func New() *Tracker {
	return &Tracker{
		pools: make(map[poolID]*devicePool),
		pool:  make(map[string]poolID),
		rules: make(map[string]*resourcev1.DeviceTaintRule),
		held:  make(map[string]bool),
	}
}

// ObserveSlice records slice, replacing the slice of its name; call it on
// every add and update of a ResourceSlice. It reports whether any device's
// taints may have changed: the slice has or had a taint, or its pool's newest
// generation changed.
func (x *Tracker) ObserveSlice(slice *resourcev1.ResourceSlice) bool {
	if slice == nil {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	id := poolID{slice.Spec.Driver, slice.Spec.Pool.Name}
	var before int64
	p := x.pools[id]
	if p != nil {
		before = p.generation
	}
	changed := x.removeSliceLocked(slice.Name)
	if p = x.pools[id]; p == nil {
		p = &devicePool{slices: make(map[string]*resourcev1.ResourceSlice)}
		x.pools[id] = p
		before = slice.Spec.Pool.Generation // a new pool: no generation is replaced
	}
	p.slices[slice.Name] = slice
	x.pool[slice.Name] = id
	p.generation = newestGeneration(p.slices)
	return changed || hasTaints(slice) || p.generation != before
}

// ForgetSlice forgets the ResourceSlice named name; call it on every delete.
// It reports whether any device's taints may have changed.
func (x *Tracker) ForgetSlice(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.removeSliceLocked(name)
}

// removeSliceLocked removes the slice named name from its pool and reports
// whether that may change a device's taints: it had a taint, or the pool's
// newest generation changed (its other slices with taints count again).
func (x *Tracker) removeSliceLocked(name string) bool {
	id, ok := x.pool[name]
	if !ok {
		return false
	}
	delete(x.pool, name)
	p := x.pools[id]
	s, before := p.slices[name], p.generation
	delete(p.slices, name)
	if len(p.slices) == 0 {
		delete(x.pools, id)
		return hasTaints(s)
	}
	p.generation = newestGeneration(p.slices)
	return hasTaints(s) || p.generation != before
}

// ObserveRule records rule, replacing the rule of its name; call it on every
// add and update of a DeviceTaintRule.
func (x *Tracker) ObserveRule(rule *resourcev1.DeviceTaintRule) {
	if rule == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rules[rule.Name] = rule
}

// ForgetRule forgets the DeviceTaintRule named name; call it on every delete.
func (x *Tracker) ForgetRule(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.rules, name)
	delete(x.held, name)
}

// Hold keeps the taint of the DeviceTaintRule named name out of
// [Tracker.Taints] while held is true, so that it starts no eviction
// (a guard against a rule that selects far more than meant); it reports
// whether that changed anything.
func (x *Tracker) Hold(name string, held bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.held[name] == held {
		return false
	}
	if held {
		x.held[name] = true
	} else {
		delete(x.held, name)
	}
	return true
}

// Held reports whether the DeviceTaintRule named name is held ([Tracker.Hold]).
func (x *Tracker) Held(name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.held[name]
}

// Taints returns the taints device id has now, of every effect: those of its
// entry in its pool's newest generation of slices, then those of the rules
// that select it and are not held, by rule name. The result is the caller's.
func (x *Tracker) Taints(id tolerations.DeviceID) []tolerations.DeviceTaint {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []tolerations.DeviceTaint
	if p := x.pools[poolID{id.Driver, id.Pool}]; p != nil {
		for _, s := range p.slices {
			if s.Spec.Pool.Generation != p.generation {
				continue
			}
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				if d.Name != id.Device {
					continue
				}
				for _, t := range d.Taints {
					out = append(out, tolerations.DeviceTaint{DeviceTaint: t})
				}
			}
		}
	}
	n := len(out)
	for name, r := range x.rules {
		if !x.held[name] && RuleSelects(r.Spec.DeviceSelector, id) {
			out = append(out, tolerations.DeviceTaint{DeviceTaint: r.Spec.Taint, Rule: name})
		}
	}
	slices.SortFunc(out[n:], func(a, b tolerations.DeviceTaint) int { return cmp.Compare(a.Rule, b.Rule) })
	return out
}

// Rules returns the DeviceTaintRules recorded, in no order.
func (x *Tracker) Rules() []*resourcev1.DeviceTaintRule {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*resourcev1.DeviceTaintRule, 0, len(x.rules))
	for _, r := range x.rules {
		out = append(out, r)
	}
	return out
}

func newestGeneration(slices map[string]*resourcev1.ResourceSlice) int64 {
	first, g := true, int64(0)
	for _, s := range slices {
		if first || s.Spec.Pool.Generation > g {
			first, g = false, s.Spec.Pool.Generation
		}
	}
	return g
}

func hasTaints(s *resourcev1.ResourceSlice) bool {
	for i := range s.Spec.Devices {
		if len(s.Spec.Devices[i].Taints) > 0 {
			return true
		}
	}
	return false
}

// RuleSelects reports whether a DeviceTaintRule with selector sel selects the
// device id: a nil selector selects none, and each set field (driver, pool,
// device) must equal id's, so the empty selector selects every device.
func RuleSelects(sel *resourcev1.DeviceTaintSelector, id tolerations.DeviceID) bool {
	if sel == nil {
		return false
	}
	return (sel.Driver == nil || *sel.Driver == id.Driver) &&
		(sel.Pool == nil || *sel.Pool == id.Pool) &&
		(sel.Device == nil || *sel.Device == id.Device)
}
