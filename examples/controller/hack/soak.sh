#!/usr/bin/env bash
# Runs the soak (integration/soak): the controller's binary, three replicas,
# against a real kube-apiserver and etcd under seeded churn, with the leader
# SIGKILLed every few minutes and the API server restarted every ten; the
# oracle checks the whole run and the never-killed replica is sampled for
# leaks. Prints the report (Markdown) at the end.
#
# Usage: examples/controller/hack/soak.sh DURATION SEED [REPORT]
#   DURATION  a Go duration, 5m or more (e.g. 60m)
#   SEED      the churn's and the faults' seed (a failed run prints its own)
#   REPORT    also write the report to this file
# Environment: TAINTKIT_SOAK_PODS (200), TAINTKIT_SOAK_NODES (10),
#   TAINTKIT_SOAK_REPLICAS (3; 1 runs the sampled replica alone, leading),
#   TAINTKIT_SOAK_EVICTION_API (true; false evicts by DELETE),
#   TAINTKIT_SOAK_KILL_EVERY (3m: the leader kills' spacing, 45s or more),
#   TAINTKIT_SOAK_LOGS (a directory to keep the replicas' logs in, and the audit log
#   of a failed soak), TAINTKIT_SOAK_VERBOSITY (the replicas' -v, 2).
# Needs etcd (Debian's etcd-server) and builds the kube-apiserver once
# (hack/build-kube-apiserver.sh, ~5 minutes cold).
set -euo pipefail
if [ $# -lt 2 ]; then
	sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
here="$(cd "$(dirname "$0")/.." && pwd)"
duration=$1 seed=$2 report=${3:-}
if [ -n "$report" ]; then
	report="$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
fi
TAINTKIT_KUBE_APISERVER=${TAINTKIT_KUBE_APISERVER:-$("$here/hack/build-kube-apiserver.sh")}
# go test's timeout: the soak, its set-up and drain, and room (whole
# minutes or hours only; other forms get 24 h, the test bounds itself too).
case $duration in
*h) timeout=$(( ${duration%h} * 60 + 20 ))m ;;
*m) timeout=$(( ${duration%m} + 20 ))m ;;
*) timeout=24h ;;
esac
cd "$here"
TAINTKIT_KUBE_APISERVER=$TAINTKIT_KUBE_APISERVER TAINTKIT_SOAK=$duration TAINTKIT_SOAK_SEED=$seed \
	TAINTKIT_SOAK_REPORT=$report \
	go test -count=1 -v -timeout "$timeout" -run '^TestSoak$' ./integration/soak
