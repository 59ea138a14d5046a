#!/usr/bin/env bash
# CI's performance check: timedqueue against upstream's TimedWorkerQueue in
# the same process (bench/upstream's TestPerfRatios), failing when ours loses
# half its lead on AddWork or UpdateWork, or its p99 lateness is more than
# twice upstream's in six of seven rounds. Prints each figure and the load
# average. About 15 s; a queue lost by far fails within about a minute.
#
# Usage: scripts/perfcheck.sh
set -euo pipefail
cd "$(dirname "$0")/../bench/upstream"
TAINTKIT_PERFCHECK=1 go test -run '^TestPerfRatios$' -count=1 -v . | grep -v '^=== RUN'
