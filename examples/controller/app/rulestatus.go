package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/taintkit/taintkit/tolerations"
)

// ruleStatusPeriod is the shortest time between two writes of a
// DeviceTaintRule's status, as kube-controller-manager's
// device-taint-eviction-controller keeps it: the condition's
// LastTransitionTime changes with every write, and a write comes no sooner
// than this after it unless the rule's generation changed.
const ruleStatusPeriod = 10 * time.Second

// The reasons of the EvictionInProgress condition: upstream's, and the
// guard's TooManyPods.
const (
	reasonPodsPendingEviction = "PodsPendingEviction"
	reasonCompleted           = "Completed"
	reasonNotStarted          = "NotStarted"
	reasonNoEffect            = "NoEffect"
	reasonOtherEffect         = "OtherEffect"
	reasonTooManyPods         = "TooManyPods"
)

// ruleStatus writes the EvictionInProgress condition of DeviceTaintRules'
// status, on the leader only (it runs with the manager), with server-side
// apply through the fenced client. In a dry run it writes nothing and logs
// the condition it would write.
type ruleStatus struct {
	x        *devices
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      logr.Logger
	dryRun   bool
	queue    workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	warned map[types.UID]int64 // the generation of each held rule warned of
}

func newRuleStatus(x *devices, client kubernetes.Interface, recorder record.EventRecorder, log logr.Logger, dryRun bool) *ruleStatus {
	return &ruleStatus{
		x: x, client: client, recorder: recorder, log: log.WithName("rule-status"), dryRun: dryRun,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		warned: make(map[types.UID]int64),
	}
}

// add asks for the status of the rule named name to be brought up to date.
func (s *ruleStatus) add(name string) { s.queue.Add(name) }

// run writes statuses until ctx is done.
func (s *ruleStatus) run(ctx context.Context) {
	stop := context.AfterFunc(ctx, s.queue.ShutDown)
	defer stop()
	for {
		name, quit := s.queue.Get()
		if quit {
			return
		}
		if err := s.sync(ctx, name); err != nil && ctx.Err() == nil {
			s.log.Error(err, "Writing a DeviceTaintRule's status", "deviceTaintRule", name)
			s.queue.AddRateLimited(name)
		} else {
			s.queue.Forget(name)
		}
		s.queue.Done(name)
	}
}

// sync brings the status of the rule named name up to date, or asks to be
// called again when ruleStatusPeriod has passed since its last write.
func (s *ruleStatus) sync(ctx context.Context, name string) error {
	rule, err := s.x.ruleLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := time.Now()
	var existing metav1.Condition
	for _, c := range rule.Status.Conditions {
		if c.Type == resourcev1.DeviceTaintConditionEvictionInProgress {
			existing = c
			since := now.Sub(c.LastTransitionTime.Time)
			if c.ObservedGeneration == rule.Generation && since < ruleStatusPeriod {
				s.queue.AddAfter(name, ruleStatusPeriod-since)
				return nil
			}
		}
	}
	cond := s.condition(rule, now)
	if cond.Reason == reasonTooManyPods {
		s.warn(rule, cond.Message)
	}
	if cond.Status == existing.Status && cond.Reason == existing.Reason && cond.Message == existing.Message &&
		cond.ObservedGeneration == existing.ObservedGeneration {
		return nil
	}
	if s.dryRun {
		s.log.V(2).Info("Dry run: would write a DeviceTaintRule's status", "deviceTaintRule", name, "reason", cond.Reason, "message", cond.Message)
		return nil
	}
	ltt := metav1.NewTime(now)
	apply := resourceac.DeviceTaintRule(name).WithUID(rule.UID).WithStatus(resourceac.DeviceTaintRuleStatus().WithConditions(
		metav1ac.Condition().WithType(cond.Type).WithStatus(cond.Status).WithReason(cond.Reason).WithMessage(cond.Message).
			WithObservedGeneration(cond.ObservedGeneration).WithLastTransitionTime(ltt)))
	if _, err := s.client.ResourceV1().DeviceTaintRules().ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: Component, Force: true}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // deleted, or replaced: its own events bring the new one
		}
		return fmt.Errorf("app: apply the status of DeviceTaintRule %s: %w", name, err)
	}
	s.log.V(2).Info("Wrote a DeviceTaintRule's status", "deviceTaintRule", name, "reason", cond.Reason, "message", cond.Message)
	return nil
}

// condition is the EvictionInProgress condition rule has now (its
// LastTransitionTime not set), as upstream words it; a rule with effect
// None gets the counts a NoExecute taint would have, a held rule the
// guard's TooManyPods.
func (s *ruleStatus) condition(rule *resourcev1.DeviceTaintRule, now time.Time) metav1.Condition {
	c := metav1.Condition{
		Type:               resourcev1.DeviceTaintConditionEvictionInProgress,
		Status:             metav1.ConditionFalse,
		ObservedGeneration: rule.Generation,
	}
	var msg []string
	switch rule.Spec.Taint.Effect {
	case resourcev1.DeviceTaintEffectNoExecute:
		n := s.x.count(rule, now)
		switch {
		case s.x.taints.Held(rule.Name):
			c.Reason = reasonTooManyPods
			msg = append(msg, fmt.Sprintf("%s would be evicted in %s, more than the limit of %d (--device-taint-rule-max-pods): no eviction started. Narrow the rule's selector or raise the limit.",
				count(n.pods, "pod"), count(n.namespaces, "namespace"), s.x.maxPods))
		case n.pending > 0:
			c.Status, c.Reason = metav1.ConditionTrue, reasonPodsPendingEviction
			verb := "need"
			if n.pending == 1 {
				verb = "needs"
			}
			msg = append(msg, fmt.Sprintf("%s %s to be evicted in %s.", count(n.pending, "pod"), verb, count(n.pendingNamespaces, "namespace")))
		case s.x.evictedBy(rule.UID) > 0:
			c.Reason = reasonCompleted
		default:
			c.Reason = reasonNotStarted
		}
	case resourcev1.DeviceTaintEffectNone:
		n := s.x.count(rule, now)
		c.Reason = reasonNoEffect
		msg = append(msg, fmt.Sprintf("%s selected. %s selected. %s would be evicted in %s if the effect was NoExecute.",
			count(s.x.published(rule), "published device"), count(n.allocated, "allocated device"),
			count(n.pending, "pod"), count(n.pendingNamespaces, "namespace")))
	default:
		c.Reason = reasonOtherEffect
		msg = append(msg, "Eviction only happens for the NoExecute effect.")
	}
	if e := s.x.evictedBy(rule.UID); e > 0 {
		msg = append(msg, count(e, "pod")+" evicted since starting the controller.")
	}
	c.Message = strings.Join(msg, " ")
	return c
}

// warn records a Warning event about a held rule, once per generation of
// it. Rules are cluster-scoped: the event is in namespace default.
func (s *ruleStatus) warn(rule *resourcev1.DeviceTaintRule, message string) {
	s.mu.Lock()
	g, ok := s.warned[rule.UID]
	s.warned[rule.UID] = rule.Generation
	s.mu.Unlock()
	if ok && g == rule.Generation {
		return
	}
	ref := &v1.ObjectReference{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "DeviceTaintRule", Name: rule.Name, UID: rule.UID}
	s.recorder.Eventf(ref, v1.EventTypeWarning, reasonTooManyPods, "DeviceTaintRule %s: %s", rule.Name, message)
}

// count says "1 pod", "2 pods" (or "0 pods").
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// evicted is the manager's Evicted hook: it counts the pods each rule's
// taint removed, for the rule's status.
func (x *devices) evicted(_ *v1.Pod, d tolerations.Decision) {
	if d.Rule == "" {
		return
	}
	rule, err := x.ruleLister.Get(d.Rule)
	if err != nil {
		return
	}
	x.mu.Lock()
	x.evictedCount[rule.UID]++
	x.mu.Unlock()
	x.statusChanged(d.Rule)
}

// evictedBy returns how many pods the rule with uid evicted since this
// process started.
func (x *devices) evictedBy(uid types.UID) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.evictedCount[uid]
}
