package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// The figures of an outage, from the deletions the watch saw: the halves'
// times from the taint, lateness past each deadline, and the pods deleted
// early, never, or after a pod due more than 1 s later.
func TestSummarise(t *testing.T) {
	out := &outage{Tainted: at(0), Deletions: []deletion{
		{Pod: "a", Toleration: 0, Deadline: at(0), Deleted: at(2 * time.Second)},
		{Pod: "b", Toleration: 0, Deadline: at(0), Deleted: at(4 * time.Second)},
		{Pod: "c", Toleration: time.Minute, Deadline: at(time.Minute), Deleted: at(61 * time.Second)},
		// Deleted after c, which was due 59 s later: out of order.
		{Pod: "d", Toleration: 0, Deadline: at(time.Second), Deleted: at(62 * time.Second)},
		// Deleted 1 s before its deadline: early.
		{Pod: "e", Toleration: time.Minute, Deadline: at(time.Minute), Deleted: at(59 * time.Second)},
		{Pod: "f", Toleration: time.Minute, Deadline: at(time.Minute)}, // never deleted
	}}
	s := out.summarise()
	assert.Equal(t, 62*time.Second, s.ZeroGone, "the last 0 s pod")
	assert.Equal(t, 62*time.Second, s.AllGone)
	assert.Equal(t, 1, s.Missing)
	assert.Equal(t, 1, s.Early)
	assert.Equal(t, 1, s.OutOfOrder)
	assert.Equal(t, 61*time.Second, s.LateMax, "d: due at 1 s, deleted at 62 s")
	assert.Equal(t, 2*time.Second, s.LateP50)
}

// The rate of evictions is read from the first write to each pod as the
// server received it, over a sliding window.
func TestMaxPerWindow(t *testing.T) {
	out := &outage{FirstWrites: map[string][]time.Time{"c": {
		at(0), at(9 * time.Second), at(9999 * time.Millisecond), at(10 * time.Second), at(25 * time.Second),
	}}}
	assert.Equal(t, 3, out.maxPerWindow("c", 10*time.Second), "0, 9 and 9.999 s; 10 s is the next window's")
	assert.Equal(t, 0, out.maxPerWindow("other", 10*time.Second))
}

func TestClientOf(t *testing.T) {
	for ua, want := range map[string]string{
		"taintkit-noexecute/devel (vm_abc)":                                                "taintkit-noexecute",
		"upstream-taint-eviction/v0.0.0 (linux/amd64) kubernetes/$Format/node-controller":  "upstream-taint-eviction/node-controller",
		"upstream-taint-eviction/v0.0.0 (linux/amd64) kubernetes/$Format/shared-informers": "upstream-taint-eviction/shared-informers",
		"scale/v0.0.0 (linux/amd64) kubernetes/$Format":                                    "scale",
	} {
		assert.Equal(t, want, clientOf(ua), "clientOf(%q)", ua)
	}
}
