#!/usr/bin/env bash
# CI's performance check: timedqueue against upstream's TimedWorkerQueue in
# the same process (bench/upstream's TestPerfRatios), failing when ours loses
# half its lead on AddWork or UpdateWork, or its p99 lateness is four times
# upstream's. Prints each figure and the load average. About 10 s.
#
# Usage: scripts/perfcheck.sh
set -euo pipefail
cd "$(dirname "$0")/../bench/upstream"
TAINTKIT_PERFCHECK=1 go test -run '^TestPerfRatios$' -count=1 -v . | grep -v '^=== RUN'
