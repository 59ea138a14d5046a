package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/taintkit/taintkit/examples/controller/internal/oracle"
	"github.com/taintkit/taintkit/examples/controller/internal/testenv"
	"github.com/taintkit/taintkit/examples/controller/podcache"
)

// deletion is a tainted pod and when a watch saw it deleted (deletionTimestamp
// set, or gone).
type deletion struct {
	Pod        string
	Toleration time.Duration
	Deadline   time.Time // the taint's TimeAdded (as stored) + toleration
	Deleted    time.Time // zero if never
}

// outage is what one zone outage measured.
type outage struct {
	TaintedNodes, TaintedPods int
	Tainted                   time.Time // when the harness started tainting
	Deletions                 []deletion
	PeakGoroutines            int
	Before, After             usage   // the controller's
	ServersBefore, ServersEnd servers // the API server's and etcd's
	Requests                  map[string]map[string]int
	// FirstWrites are, by client, when the API server received each
	// pod's first write (the first request of its eviction).
	FirstWrites map[string][]time.Time
	Violations  []string // the oracle's
}

// deletionWatch records, for every pod of the namespace, the first moment a
// watch saw it deleting.
type deletionWatch struct {
	mu      sync.Mutex
	deleted map[string]time.Time
	stop    context.CancelFunc
}

func watchDeletions(ctx context.Context, cl *cluster) (*deletionWatch, error) {
	w := &deletionWatch{deleted: map[string]time.Time{}}
	mark := func(pod *corev1.Pod) {
		w.mu.Lock()
		if _, ok := w.deleted[pod.Name]; !ok {
			w.deleted[pod.Name] = time.Now()
		}
		w.mu.Unlock()
	}
	inf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(cl.c.CoreV1().RESTClient(), "pods", namespace, fields.Everything()),
		&corev1.Pod{}, 0, cache.Indexers{})
	if err := inf.SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return podcache.Trim(pod), nil
		}
		return obj, nil
	}); err != nil {
		return nil, err
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp != nil {
				mark(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				mark(pod)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	ctx, w.stop = context.WithCancel(ctx)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("scale: the deletion watch did not sync")
	}
	return w, nil
}

func (w *deletionWatch) count(names map[string]bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for name := range names {
		if _, ok := w.deleted[name]; ok {
			n++
		}
	}
	return n
}

// runOutage taints every every-th node (every tenth by default) with
// node.kubernetes.io/unreachable NoExecute (TimeAdded set) while p runs,
// and waits until every pod on them is deleted or timeout passes.
func runOutage(ctx context.Context, cl *cluster, p *controllerProc, o *oracle.Oracle, every int, long, timeout, settle time.Duration, backlog func(pods int) time.Duration) (*outage, error) {
	w, err := watchDeletions(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	api, etcd := cl.env.PIDs()
	out := &outage{Before: p.usage(), ServersBefore: readServers(api, etcd)}

	var taintedNodes []int
	for j := 0; j < cl.nodes; j += every {
		taintedNodes = append(taintedNodes, j)
	}
	out.TaintedNodes = len(taintedNodes)
	taint := testenv.NoExecuteTaint(corev1.TaintNodeUnreachable, "")
	names := map[string]bool{}
	for i := range cl.pods {
		if (i%cl.nodes)%every != 0 {
			continue
		}
		tol := time.Duration(*toleration(i, cl.nodes, long).TolerationSeconds) * time.Second
		out.Deletions = append(out.Deletions, deletion{Pod: podName(i), Toleration: tol, Deadline: taint.TimeAdded.Add(tol)})
		names[podName(i)] = true
	}
	out.TaintedPods = len(out.Deletions)
	if o != nil {
		o.Fault(fmt.Sprintf("a backlog of %d evictions", out.TaintedPods), time.Now(), time.Now().Add(backlog(out.TaintedPods)))
	}

	out.Tainted = time.Now()
	if err := parallel(ctx, len(taintedNodes), 32, func(ctx context.Context, k int) error {
		_, err := testenv.TaintNode(ctx, cl.c, nodeName(taintedNodes[k]), taint)
		return err
	}); err != nil {
		return nil, err
	}

	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for w.count(names) < len(names) && time.Now().Before(deadline) {
		if g := p.goroutines(ctx); g > out.PeakGoroutines {
			out.PeakGoroutines = g
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.exited:
			return nil, fmt.Errorf("scale: %s exited during the outage", p.kind)
		case <-ticker.C:
		}
	}
	end := time.Now()
	out.After, out.ServersEnd = p.usage(), readServers(api, etcd)
	w.mu.Lock()
	for k := range out.Deletions {
		out.Deletions[k].Deleted = w.deleted[out.Deletions[k].Pod]
	}
	w.mu.Unlock()
	// Requests still in flight at the last deletion (events) are counted
	// for --settle more.
	time.Sleep(settle)
	out.Requests, out.FirstWrites, err = countRequests(cl.env.AuditLogPath(), out.Tainted, end.Add(settle))
	if err != nil {
		return nil, err
	}
	if o != nil {
		rep, err := o.Check()
		if err != nil {
			return nil, err
		}
		out.Violations = rep.Violations
	}
	return out, nil
}

// countRequests counts the requests the API server received from from to
// to, by client (the User-Agent's product, and kube-controller-manager's
// client name) and by verb and resource, from its audit log; and returns,
// by client, when it received the first write to each pod.
func countRequests(path string, from, to time.Time) (map[string]map[string]int, map[string][]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	counts := map[string]map[string]int{}
	firstWrites := map[string][]time.Time{}
	written := map[string]bool{} // client + pod
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			Received metav1.MicroTime `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "RequestReceived" {
			continue
		}
		if ev.Received.Time.Before(from) || ev.Received.Time.After(to) {
			continue
		}
		what := ev.Verb
		if ev.ObjectRef != nil {
			what += " " + ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
		}
		client := clientOf(ev.UserAgent)
		if counts[client] == nil {
			counts[client] = map[string]int{}
		}
		counts[client][what]++
		if ev.ObjectRef != nil && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Name != "" &&
			(ev.Verb == "patch" || ev.Verb == "update" || ev.Verb == "delete" || ev.Verb == "create") &&
			!written[client+"/"+ev.ObjectRef.Name] {
			written[client+"/"+ev.ObjectRef.Name] = true
			firstWrites[client] = append(firstWrites[client], ev.Received.Time)
		}
	}
	return counts, firstWrites, sc.Err()
}

// clientOf names a request's client from its User-Agent.
func clientOf(ua string) string {
	name, _, _ := strings.Cut(ua, "/")
	for _, suffix := range []string{"/node-controller", "/shared-informers"} {
		if strings.HasSuffix(ua, suffix) {
			return name + suffix
		}
	}
	return name
}

// percentile returns the p-th percentile (0..1) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// summary is an outage's figures.
type summary struct {
	ZeroGone, AllGone time.Duration // from the taint until the last 0 s pod, the last pod, was deleted
	Missing           int           // tainted pods never deleted
	LateP50, LateP99  time.Duration // deletion past its deadline
	LateMax           time.Duration
	Early             int // deleted before the deadline
	OutOfOrder        int // deleted after a pod whose deadline is more than 1 s later
}

func (out *outage) summarise() summary {
	var s summary
	var late []time.Duration
	dels := slices.Clone(out.Deletions)
	slices.SortFunc(dels, func(a, b deletion) int { return a.Deleted.Compare(b.Deleted) })
	var maxDeadline time.Time
	for _, d := range dels {
		if d.Deleted.IsZero() {
			s.Missing++
			continue
		}
		took := d.Deleted.Sub(out.Tainted)
		if d.Toleration == 0 {
			s.ZeroGone = max(s.ZeroGone, took)
		}
		s.AllGone = max(s.AllGone, took)
		l := d.Deleted.Sub(d.Deadline)
		if l < 0 {
			s.Early++
		}
		late = append(late, l)
		if d.Deadline.Add(time.Second).Before(maxDeadline) {
			s.OutOfOrder++
		}
		if d.Deadline.After(maxDeadline) {
			maxDeadline = d.Deadline
		}
	}
	slices.Sort(late)
	s.LateP50, s.LateP99 = percentile(late, 0.5), percentile(late, 0.99)
	if len(late) > 0 {
		s.LateMax = late[len(late)-1]
	}
	return s
}

// maxPerWindow returns the most evictions client started in any window of
// length w (a sliding window over the times the API server received each
// pod's first write: the first request of its eviction, which starts when
// it has a token of --eviction-rate's budget).
func (out *outage) maxPerWindow(client string, w time.Duration) int {
	times := slices.Clone(out.FirstWrites[client])
	slices.SortFunc(times, time.Time.Compare)
	best, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
