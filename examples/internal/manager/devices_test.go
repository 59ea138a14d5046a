package manager_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taintkit/taintkit/examples/internal/manager"
	"github.com/taintkit/taintkit/tolerations"
)

// Tests of the manager's one decision per pod: the taints of its node and of
// the devices allocated to it, the earliest of both.

var gpu0 = tolerations.DeviceID{Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}

// deviceTable is the devices of each pod (by name), as a controller's
// Config.Devices reads them from its claims and slices.
type deviceTable struct {
	mu   sync.Mutex
	devs map[string][]tolerations.Device
}

func (d *deviceTable) get(pod *v1.Pod) []tolerations.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.devs[pod.Name]
}

// withDevices starts the env's manager with the table's devices.
func withDevices(d *deviceTable) func(*manager.Config) {
	return func(c *manager.Config) { c.Devices = d.get }
}

// setDevice gives pod gpu0 with tols and taints and tells the manager.
func (e *env) setDevice(d *deviceTable, pod string, tols []resourcev1.DeviceToleration, taints ...tolerations.DeviceTaint) {
	d.mu.Lock()
	if d.devs == nil {
		d.devs = map[string][]tolerations.Device{}
	}
	d.devs[pod] = []tolerations.Device{{ID: gpu0, Tolerations: tols, Taints: taints}}
	d.mu.Unlock()
	e.manager().DevicesChanged(e.pod(pod))
	e.settle()
}

// brokenGPU is a NoExecute device taint added at, from the rule "broken".
func brokenGPU(at time.Time) tolerations.DeviceTaint {
	return tolerations.DeviceTaint{
		DeviceTaint: resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(at))},
		Rule:        "broken",
	}
}

// tolDevice tolerates brokenGPU for secs seconds (< 0: forever), with the
// given effect ("" tolerates every effect).
func tolDevice(secs int64, effect resourcev1.DeviceTaintEffect) []resourcev1.DeviceToleration {
	t := resourcev1.DeviceToleration{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpExists, Effect: effect}
	if secs >= 0 {
		t.TolerationSeconds = ptr.To(secs)
	}
	return []resourcev1.DeviceToleration{t}
}

// An untolerated device taint evicts at once, with the device taint
// manager's event reason and DisruptionTarget reason, naming the device and
// the rule.
func TestDeviceTaintEvicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var devs deviceTable
		e := newEnv(t, withDevices(&devs))
		e.addNode("n1")
		var lastSeen sync.Map
		e.c.OnPod(func(old, new *v1.Pod) {
			if new == nil {
				lastSeen.Store(old.Name, old)
			}
		})
		e.addPod("p", "n1", nil)
		e.setDevice(&devs, "p", nil, brokenGPU(t0))
		assert.False(t, e.exists("p"), "pod with an untolerated device taint not evicted at once")
		assert.Equal(t, []string{
			"Normal DeviceTaintManagerEviction Scheduled for deletion at 2025-01-01T00:00:00Z: device taint example.com/broken:NoExecute on gpu.example.com/n1/gpu-0 from rule broken not tolerated",
			"Normal DeviceTaintManagerEviction Marking for deletion Pod default/p: device taint example.com/broken:NoExecute on gpu.example.com/n1/gpu-0 from rule broken",
		}, e.rec.take())
		p, ok := lastSeen.Load("p")
		require.True(t, ok)
		cond := findCondition(p.(*v1.Pod), v1.DisruptionTarget)
		require.NotNil(t, cond, "DisruptionTarget not set before the delete")
		assert.Equal(t, manager.ReasonDeletionByDeviceTaintManager, cond.Reason)
		assert.Equal(t, "Device taint manager: deleting due to NoExecute device taint example.com/broken:NoExecute on gpu.example.com/n1/gpu-0 from rule broken", cond.Message)
	})
}

// A node update that decides Never for the node's taints (the node's taint
// goes) does not cancel the eviction a device's taint decided.
func TestNodeNeverDoesNotCancelDeviceEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var devs deviceTable
		e := newEnv(t, withDevices(&devs))
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(5))
		e.setDevice(&devs, "p", tolDevice(10, resourcev1.DeviceTaintEffectNoExecute), brokenGPU(t0))
		e.taint("n1") // the node's countdown ends first: +5 s
		w, ok := e.manager().ScheduledEviction("default", "p")
		require.True(t, ok)
		assert.Equal(t, t0.Add(5*time.Second), w.FireAt, "the earlier of node and device deadlines")
		e.step(2 * time.Second)
		e.untaint("n1")
		w, ok = e.manager().ScheduledEviction("default", "p")
		require.True(t, ok, "the node's taint leaving cancelled the device's eviction")
		assert.Equal(t, t0.Add(10*time.Second), w.FireAt)
		assert.Equal(t, int64(0), e.manager().Stats().Cancelled)
		pending := e.manager().Pending()
		require.Len(t, pending, 1)
		assert.Equal(t, gpu0, pending[0].Device)
		assert.Equal(t, "broken", pending[0].Rule)
		assert.Equal(t, "example.com/broken", pending[0].Taint.Key)

		e.step(8*time.Second - time.Nanosecond)
		assert.True(t, e.exists("p"), "evicted before the device toleration ran out")
		e.step(time.Nanosecond)
		assert.False(t, e.exists("p"), "not evicted when the device toleration ran out")
	})
}

// A device taint that leaves does not cancel the eviction the node's taint
// decided; the earlier of the two wins while both are there.
func TestDeviceNeverDoesNotCancelNodeEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var devs deviceTable
		e := newEnv(t, withDevices(&devs))
		e.addNode("n1")
		e.addPod("p", "n1", tolerating(10))
		e.taint("n1")
		e.setDevice(&devs, "p", tolDevice(5, ""), brokenGPU(t0))
		w, ok := e.manager().ScheduledEviction("default", "p")
		require.True(t, ok)
		assert.Equal(t, t0.Add(5*time.Second), w.FireAt, "the device's earlier deadline wins")
		e.setDevice(&devs, "p", tolDevice(5, "")) // the device's taint goes
		w, ok = e.manager().ScheduledEviction("default", "p")
		require.True(t, ok, "the device taint leaving cancelled the node's eviction")
		assert.Equal(t, t0.Add(10*time.Second), w.FireAt)
		e.step(10*time.Second - time.Nanosecond)
		assert.True(t, e.exists("p"))
		e.step(time.Nanosecond)
		assert.False(t, e.exists("p"))
	})
}

// A device taint removed before its countdown ends cancels the eviction,
// with the device taint manager's event.
func TestDeviceTaintRemovedCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var devs deviceTable
		e := newEnv(t, withDevices(&devs))
		e.addNode("n1")
		e.addPod("p", "n1", nil)
		e.setDevice(&devs, "p", tolDevice(30, resourcev1.DeviceTaintEffectNoExecute), brokenGPU(t0))
		assert.Equal(t, []string{
			"Normal DeviceTaintManagerEviction Scheduled for deletion at 2025-01-01T00:00:30Z: device taint example.com/broken:NoExecute on gpu.example.com/n1/gpu-0 from rule broken",
		}, e.rec.take())
		e.step(10 * time.Second)
		e.setDevice(&devs, "p", tolDevice(30, resourcev1.DeviceTaintEffectNoExecute))
		assert.Equal(t, []string{"Normal DeviceTaintManagerEviction Cancelling deletion of Pod default/p"}, e.rec.take())
		_, ok := e.manager().ScheduledEviction("default", "p")
		assert.False(t, ok)
		e.step(time.Hour)
		assert.True(t, e.exists("p"))
		assert.Equal(t, int64(1), e.manager().Stats().Cancelled)
	})
}

// A device's countdown starts no earlier than the pod's binding (a pod that
// arrives after the taint gets its full toleration), and an empty-effect
// toleration tolerates a NoExecute taint.
func TestDeviceCountdownFromBinding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var devs deviceTable
		e := newEnv(t, withDevices(&devs))
		e.addNode("n1")
		e.step(time.Minute) // the taint is a minute old when the pod arrives
		e.addPod("late", "n1", nil)
		e.setDevice(&devs, "late", tolDevice(20, ""), brokenGPU(t0))
		w, ok := e.manager().ScheduledEviction("default", "late")
		require.True(t, ok)
		assert.Equal(t, t0.Add(time.Minute+20*time.Second), w.FireAt)
		e.step(20*time.Second - time.Nanosecond)
		assert.True(t, e.exists("late"), "evicted before its full toleration")
		e.step(time.Nanosecond)
		assert.False(t, e.exists("late"))
	})
}

// The Evicted hook is called with the decision a pod was removed for; a
// device's eviction goes through the Eviction API like a node's.
func TestDeviceEvictionThroughAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var devs deviceTable
		evicted := make(chan tolerations.Decision, 1)
		e := newEnv(t, withDevices(&devs), func(c *manager.Config) {
			c.UseEvictionAPI = true
			c.Evicted = func(_ *v1.Pod, d tolerations.Decision) { evicted <- d }
		})
		e.addNode("n1")
		e.addPod("p", "n1", nil)
		e.setDevice(&devs, "p", nil, brokenGPU(t0))
		assert.False(t, e.exists("p"))
		require.Len(t, evicted, 1)
		d := <-evicted
		assert.Equal(t, "broken", d.Rule)
		assert.Equal(t, gpu0, d.Device)
		assert.Equal(t, int64(1), e.manager().Stats().EvictedByAPI)
	})
}
