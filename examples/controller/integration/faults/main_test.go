// Package faults_test runs the controller (app.Run, in process, as its
// ServiceAccount) against a real kube-apiserver and etcd of each test's own
// (testenv.ForTest), and breaks things between them: the API server killed
// and started again, watches cut until they expire, the leader partitioned
// from the server, errors and latency on its requests. An oracle
// (internal/oracle) checks from the server's audit log and its own watch
// that the controller kept its promises: never early, never lost, never
// twice, one writer. Each test names its bounds and logs what it measured
// (lines starting MEASURED).
//
// The tests run on the real clock, in parallel: each has its own servers,
// Lease and namespace. They take a minute or two each, most of it the
// faults' own durations.
package faults_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(m.Run()) }
