package oracle

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// due is a pod's deadline in one state of its history.
type due struct {
	at      time.Time // zero: not due ever in this state
	taint   string    // key:effect of the taint whose countdown ends at at
	unknown bool      // at counts from a first sight (±1 s)
	// hidden is the countdown's start if the objects do not record it (a
	// first sight, or the first TimeAdded of a taint refreshed in place):
	// a replica that started watching after it cannot know it.
	hidden time.Time
}

func taintID(t *corev1.Taint) string { return t.Key + ":" + string(t.Effect) }

// decide is the pod's deadline on a node with taints, where taintSeen holds
// when each taint (by taintID) was first seen, firstAdded the first
// TimeAdded of each taint with one (a taint refreshed in place, the same
// key and effect with a later TimeAdded, never left: its countdown started
// at its first TimeAdded) and podSeen when the pod was first seen on the
// node.
func decide(pod *corev1.Pod, taints []corev1.Taint, taintSeen, firstAdded map[string]time.Time, podSeen time.Time) due {
	bound, podUnknown := boundAt(pod, podSeen)
	var out due
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		start, unknown := taintSeen[taintID(t)], true
		hidden := start
		if t.TimeAdded != nil && !t.TimeAdded.IsZero() {
			start, unknown, hidden = t.TimeAdded.Time, false, time.Time{}
			if first, ok := firstAdded[taintID(t)]; ok && first.Before(start) {
				start, hidden = first, first
			}
		}
		if bound.After(start) {
			start, unknown, hidden = bound, podUnknown, time.Time{}
			if podUnknown {
				hidden = bound
			}
		}
		at := start
		tolerated := false
		for j := range pod.Spec.Tolerations {
			tol := &pod.Spec.Tolerations[j]
			if !tol.ToleratesTaint(klog.Background(), t, false) {
				continue
			}
			tolerated = true
			if tol.TolerationSeconds == nil {
				at = time.Time{} // for ever
			} else if s := *tol.TolerationSeconds; s > 0 {
				at = start.Add(time.Duration(s) * time.Second)
			}
			break // the first toleration that tolerates it counts
		}
		if tolerated && at.IsZero() {
			continue
		}
		if out.at.IsZero() || at.Before(out.at) {
			out = due{at: at, taint: taintID(t), unknown: unknown, hidden: hidden}
		}
	}
	return out
}

// boundAt is when pod was bound: its PodScheduled condition's time, else
// podSeen, its first sight on its node (unknown).
func boundAt(pod *corev1.Pod, podSeen time.Time) (bound time.Time, unknown bool) {
	bound, unknown = podSeen, true
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			bound, unknown = c.LastTransitionTime.Time, false
		}
	}
	return bound, unknown
}

// segment is a stretch of a pod's history with one deadline: from its start
// until the next state. c.at zero means the pod was not due in it.
type segment struct {
	from, to time.Time
	c        due
}

// timeline walks one pod's states (its own, its node's and, with dev, its
// devices', merged by time) and returns its segments, applying the rule
// that a deadline of a node taint moves later only when its taint leaves
// the node; a device taint's deadline is the earliest of its device taints'
// in each state (their starts and the tolerations, fixed at allocation,
// already fix it), and the pod's the earlier of both. The last segment
// ends at end, or at the pod's deletion, whichever is first.
//
// With blind windows, a taint that left the node and came back within one
// counts as never gone (refreshed in place): what a watcher that relisted
// after the window saw.
func timeline(obs []podObs, nodes map[string][]nodeObs, dev *deviceModel, end time.Time, blind []FaultWindow) []segment {
	var times []time.Time
	for _, o := range obs {
		times = append(times, o.at)
	}
	devices := dev != nil && usesClaims(obs)
	if devices {
		for _, t := range append(dev.claimTimes(obs), dev.times...) {
			if !t.Before(obs[0].at) && t.Before(end) {
				times = append(times, t)
			}
		}
	}
	var nodeName string
	for _, o := range obs {
		if o.pod.Spec.NodeName != "" {
			nodeName = o.pod.Spec.NodeName
		}
	}
	nobs := nodes[nodeName]
	for _, n := range nobs {
		if !n.at.Before(obs[0].at) && n.at.Before(end) {
			times = append(times, n.at)
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.Compact(times)

	var (
		segs       []segment
		c, cn      due // the pod's deadline, and its node taints'
		pi, ni     = 0, 0
		taintSeen  = map[string]time.Time{}
		firstAdded = map[string]time.Time{}
		podSeen    time.Time
		podNode    string
		node       *corev1.Node
		gone       = map[string]time.Time{} // with blind: taints absent since, not yet forgotten
	)
	// The node's taints' first sights, from its states before the pod's.
	advanceNode := func(t time.Time) {
		for ni < len(nobs) && !nobs[ni].at.After(t) {
			node = nobs[ni].node
			present := map[string]bool{}
			if node != nil {
				for i := range node.Spec.Taints {
					id := taintID(&node.Spec.Taints[i])
					present[id] = true
					if since, ok := gone[id]; ok {
						delete(gone, id)
						if !hiddenGap(blind, since, nobs[ni].at) {
							delete(taintSeen, id)
							delete(firstAdded, id)
						}
					}
					if _, ok := taintSeen[id]; !ok {
						taintSeen[id] = nobs[ni].at
					}
					if ta := node.Spec.Taints[i].TimeAdded; ta != nil && !ta.IsZero() {
						if first, ok := firstAdded[id]; !ok || ta.Time.Before(first) {
							firstAdded[id] = ta.Time
						}
					}
				}
			}
			for id := range taintSeen {
				switch {
				case present[id]:
				case len(blind) > 0:
					if _, ok := gone[id]; !ok {
						gone[id] = nobs[ni].at
					}
				default:
					delete(taintSeen, id)
					delete(firstAdded, id)
				}
			}
			ni++
		}
	}
	var live *podObs // the pod's last state not terminating
	for k, t := range times {
		for pi+1 < len(obs) && !obs[pi+1].at.After(t) {
			pi++
		}
		o := obs[pi]
		if o.pod.Spec.NodeName != podNode {
			podNode, podSeen = o.pod.Spec.NodeName, o.at
		}
		advanceNode(t)
		var d due
		if podNode != "" && node != nil && !o.deleted && o.pod.DeletionTimestamp == nil {
			d = decide(o.pod, node.Spec.Taints, taintSeen, firstAdded, podSeen)
		}
		if !o.deleted && o.pod.DeletionTimestamp == nil {
			live = &obs[pi]
		}
		switch {
		case d.at.IsZero():
			cn = due{}
		case !cn.at.IsZero() && d.at.After(cn.at) && hasTaint(node, cn.taint):
			// Kept: a longer toleration does not postpone a deadline.
		default:
			cn = d
		}
		c = cn
		if devices && podNode != "" && !o.deleted && o.pod.DeletionTimestamp == nil {
			bound, unknown := boundAt(o.pod, podSeen)
			if dd := dev.decide(o.pod, bound, unknown, t); !dd.at.IsZero() && (c.at.IsZero() || dd.at.Before(c.at)) {
				c = dd
			}
		}
		if n := len(segs); n > 0 {
			segs[n-1].to = t
		}
		segs = append(segs, segment{from: t, to: end, c: c})
		if o.deleted || o.pod.DeletionTimestamp != nil {
			segs[len(segs)-1].to = t
			if live != nil && podNode != "" {
				segs = append(segs, seenAfter(times[k:], t, live.pod, podSeen, advanceNode, &node, &taintSeen, &firstAdded, dev, devices)...)
			}
			break
		}
	}
	return segs
}

// seenAfter judges the states of the pod's node and devices seen within a
// first sight's slack after the pod's terminating state (at t, from t on), with the
// pod as it was before: the watches of different resources are separate
// streams, so the change that made the pod due, and that the controller
// acted on, may be delivered with or after the pod's state its eviction
// wrote. Each state gives a segment of no length.
func seenAfter(times []time.Time, t time.Time, pod *corev1.Pod, podSeen time.Time, advanceNode func(time.Time),
	node **corev1.Node, taintSeen, firstAdded *map[string]time.Time, dev *deviceModel, devices bool) []segment {
	var segs []segment
	for _, t2 := range times {
		if t2.After(t.Add(firstSightSlack)) {
			break
		}
		advanceNode(t2)
		var c due
		if *node != nil {
			c = decide(pod, (*node).Spec.Taints, *taintSeen, *firstAdded, podSeen)
		}
		if devices {
			bound, unknown := boundAt(pod, podSeen)
			if dd := dev.decide(pod, bound, unknown, t2); !dd.at.IsZero() && (c.at.IsZero() || dd.at.Before(c.at)) {
				c = dd
			}
		}
		if !c.at.IsZero() {
			segs = append(segs, segment{from: t2, to: t2, c: c})
		}
	}
	return segs
}

// hiddenGap reports whether a taint absent from since to back was gone
// within one blind window, which ends faultBound after its fault: a watch
// broken by the fault resumes with a relist that shows no gap.
func hiddenGap(blind []FaultWindow, since, back time.Time) bool {
	for _, w := range blind {
		until := w.End.Add(faultBound)
		if !since.Before(w.Start) && !back.After(until) {
			return true
		}
	}
	return false
}

func hasTaint(node *corev1.Node, id string) bool {
	if node == nil {
		return false
	}
	for i := range node.Spec.Taints {
		if taintID(&node.Spec.Taints[i]) == id {
			return true
		}
	}
	return false
}
