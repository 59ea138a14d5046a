package podcache

import (
	"slices"
	"time"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Record is what [Trim] keeps of a pod, held in about a fifth of the
// memory of the trimmed *v1.Pod: a *v1.Pod is over a kilobyte before any
// field is set, and the tolerations, the namespace and the node name that
// pods repeat are held once here, not once a pod. [Record.Pod] turns a
// record back into the pod Trim returns, so that the decisions are the same.
//
// An informer keys a record by its namespace and name
// ([Record.GetObjectMeta]). Listers typed for *v1.Pod do not apply: read the
// informer's indexer and call Pod on each record, when the pod is needed (an
// index or a handler that only filters reads the accessors).
//
// A record is never modified once made, and is safe for concurrent use.
type Record struct {
	name, resourceVersion string
	uid                   types.UID
	namespace, nodeName   unique.Handle[string]
	deletionTimestamp     *metav1.Time
	tolerations           []unique.Handle[toleration]
	conditions            []v1.PodCondition // PodScheduled and DisruptionTarget
	rare                  *recordRare
}

// recordRare is what few pods have, held apart so that the others pay a
// pointer for it.
type recordRare struct {
	typeMeta                    metav1.TypeMeta
	schedulingGroup             *v1.PodSchedulingGroup
	resourceClaims              []v1.PodResourceClaim
	resourceClaimStatuses       []v1.PodResourceClaimStatus
	extendedResourceClaimStatus *v1.PodExtendedResourceClaimStatus
}

// toleration is a v1.Toleration by value, so that equal tolerations of
// different pods are held once (unique.Make).
type toleration struct {
	key, operator, value, effect string
	seconds                      int64
	hasSeconds                   bool
}

// NewRecord returns the record of pod: what Trim(pod) holds.
// NewRecord(nil) is nil.
func NewRecord(pod *v1.Pod) *Record {
	if pod == nil {
		return nil
	}
	r := &Record{
		name:              pod.Name,
		resourceVersion:   pod.ResourceVersion,
		uid:               pod.UID,
		namespace:         unique.Make(pod.Namespace),
		nodeName:          unique.Make(pod.Spec.NodeName),
		deletionTimestamp: pod.DeletionTimestamp.DeepCopy(),
	}
	if pod.Spec.Tolerations != nil {
		r.tolerations = make([]unique.Handle[toleration], len(pod.Spec.Tolerations))
		for i, t := range pod.Spec.Tolerations {
			k := toleration{key: t.Key, operator: string(t.Operator), value: t.Value, effect: string(t.Effect)}
			if t.TolerationSeconds != nil {
				k.seconds, k.hasSeconds = *t.TolerationSeconds, true
			}
			r.tolerations[i] = unique.Make(k)
		}
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodScheduled || c.Type == v1.DisruptionTarget {
			kept := *c
			kept.Type, kept.Status = canonicalCondition(c.Type, c.Status)
			r.conditions = append(r.conditions, kept)
		}
	}
	if pod.TypeMeta != (metav1.TypeMeta{}) || pod.Spec.SchedulingGroup != nil || pod.Spec.ResourceClaims != nil ||
		pod.Status.ResourceClaimStatuses != nil || pod.Status.ExtendedResourceClaimStatus != nil {
		// Trim copies these; its result then serves both.
		t := Trim(rarePod(pod.TypeMeta, pod.Spec.SchedulingGroup, pod.Spec.ResourceClaims,
			pod.Status.ResourceClaimStatuses, pod.Status.ExtendedResourceClaimStatus))
		r.rare = &recordRare{
			typeMeta:                    t.TypeMeta,
			schedulingGroup:             t.Spec.SchedulingGroup,
			resourceClaims:              t.Spec.ResourceClaims,
			resourceClaimStatuses:       t.Status.ResourceClaimStatuses,
			extendedResourceClaimStatus: t.Status.ExtendedResourceClaimStatus,
		}
	}
	return r
}

// rarePod is a pod holding only what a recordRare holds.
func rarePod(typeMeta metav1.TypeMeta, group *v1.PodSchedulingGroup, claims []v1.PodResourceClaim,
	statuses []v1.PodResourceClaimStatus, extended *v1.PodExtendedResourceClaimStatus) *v1.Pod {
	return &v1.Pod{TypeMeta: typeMeta,
		Spec:   v1.PodSpec{SchedulingGroup: group, ResourceClaims: claims},
		Status: v1.PodStatus{ResourceClaimStatuses: statuses, ExtendedResourceClaimStatus: extended},
	}
}

// canonicalCondition returns a kept condition's type and status as the
// package's constants, so that a record holds no copy of them.
func canonicalCondition(t v1.PodConditionType, s v1.ConditionStatus) (v1.PodConditionType, v1.ConditionStatus) {
	if t == v1.PodScheduled {
		t = v1.PodScheduled
	} else {
		t = v1.DisruptionTarget
	}
	for _, known := range [...]v1.ConditionStatus{v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown} {
		if s == known {
			return t, known
		}
	}
	return t, s
}

// Pod returns a new pod equal to Trim of the pod r was made from: the
// caller may modify it. It shares no memory with r other than strings.
// A nil record returns nil.
func (r *Record) Pod() *v1.Pod {
	if r == nil {
		return nil
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              r.name,
			Namespace:         value(r.namespace),
			UID:               r.uid,
			ResourceVersion:   r.resourceVersion,
			DeletionTimestamp: r.deletionTimestamp.DeepCopy(),
		},
		Spec: v1.PodSpec{NodeName: value(r.nodeName)},
	}
	if r.tolerations != nil {
		pod.Spec.Tolerations = make([]v1.Toleration, len(r.tolerations))
		for i, h := range r.tolerations {
			k := h.Value()
			t := &pod.Spec.Tolerations[i]
			t.Key, t.Operator, t.Value, t.Effect = k.key, v1.TolerationOperator(k.operator), k.value, v1.TaintEffect(k.effect)
			if k.hasSeconds {
				seconds := k.seconds
				t.TolerationSeconds = &seconds
			}
		}
	}
	if r.conditions != nil {
		pod.Status.Conditions = append([]v1.PodCondition(nil), r.conditions...)
	}
	if r.rare != nil {
		t := Trim(rarePod(r.rare.typeMeta, r.rare.schedulingGroup, r.rare.resourceClaims,
			r.rare.resourceClaimStatuses, r.rare.extendedResourceClaimStatus))
		pod.TypeMeta = t.TypeMeta
		pod.Spec.SchedulingGroup = t.Spec.SchedulingGroup
		pod.Spec.ResourceClaims = t.Spec.ResourceClaims
		pod.Status.ResourceClaimStatuses = t.Status.ResourceClaimStatuses
		pod.Status.ExtendedResourceClaimStatus = t.Status.ExtendedResourceClaimStatus
	}
	return pod
}

// Namespace returns the pod's namespace.
func (r *Record) Namespace() string { return value(r.namespace) }

// Name returns the pod's name.
func (r *Record) Name() string { return r.name }

// UID returns the pod's UID.
func (r *Record) UID() types.UID { return r.uid }

// NodeName returns the pod's spec.nodeName: "" while it is not scheduled.
func (r *Record) NodeName() string { return value(r.nodeName) }

// PodGroupName returns the name of the pod's PodGroup
// (spec.schedulingGroup.podGroupName), or "" if it has none.
func (r *Record) PodGroupName() string {
	if r.rare == nil || r.rare.schedulingGroup == nil || r.rare.schedulingGroup.PodGroupName == nil {
		return ""
	}
	return *r.rare.schedulingGroup.PodGroupName
}

// BoundAt is tolerations.PodBoundAt of the record's pod, without making
// the pod: the time of its True PodScheduled condition and true, or the
// zero Time and false.
func (r *Record) BoundAt() (time.Time, bool) {
	if r == nil {
		return time.Time{}, false
	}
	for i := range r.conditions {
		c := &r.conditions[i]
		if c.Type != v1.PodScheduled {
			continue
		}
		if c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero() {
			return time.Time{}, false
		}
		return c.LastTransitionTime.Time, true
	}
	return time.Time{}, false
}

// SameTaintInputs reports whether r and o are the same pod (UID) on the
// same node with the same tolerations, and neither has resource claims:
// then a taint decision for one is the decision for the other, whatever
// else changed (status updates, mostly). False means they may differ; for
// records with claims, compare their pods.
func (r *Record) SameTaintInputs(o *Record) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.uid == o.uid && r.nodeName == o.nodeName && !r.HasClaims() && !o.HasClaims() &&
		slices.Equal(r.tolerations, o.tolerations)
}

// HasClaims reports whether the pod names resource claims or has their
// statuses: what a device taint's decision reads.
func (r *Record) HasClaims() bool {
	return r != nil && r.rare != nil && (r.rare.resourceClaims != nil ||
		r.rare.resourceClaimStatuses != nil || r.rare.extendedResourceClaimStatus != nil)
}

// value is h's string, "" for the zero handle (of a zero Record).
func value(h unique.Handle[string]) string {
	if h == (unique.Handle[string]{}) {
		return ""
	}
	return h.Value()
}

// Transform is a transform for client-go's informers (cache.TransformFunc,
// informers.WithTransform): it turns a *v1.Pod into its *Record and
// returns anything else as it is, a record included, as a transform must be
// idempotent.
func Transform(obj any) (any, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		return NewRecord(pod), nil
	}
	return obj, nil
}
