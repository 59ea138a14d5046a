#!/usr/bin/env bash
# Runs every package's benchmarks against its baseline "built like the
# original", -count times (default 10), and summarises each with benchstat
# (medians; -col /impl puts the baseline and taintkit side by side, so every
# ratio comes from the same run). Not part of CI: it takes about 25 minutes.
#
# Usage: scripts/bench.sh [count] [outdir]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-10}
out=${2:-bench-results}
mkdir -p "$out"
root=$(pwd)
out=$(mkdir -p "$out" && cd "$out" && pwd)
# benchstat is a tool of the scripts module (scripts/go.mod pins its version).
benchstat() { go -C "$root/scripts" tool benchstat "$@"; }

run() { # name, package, regexp, benchtime
	echo "== $1" >&2
	go test -run '^$' -bench "$3" -benchmem -benchtime "$4" -count "$count" "$2" | tee "$out/$1.txt" >/dev/null
	benchstat -col /impl "$out/$1.txt" > "$out/$1.stat" || true
}

run tolerations ./tolerations/ 'GetMatchingTolerations|TaintsTolerated' 200ms
run sharding ./sharding/ . 2x
run timedqueue-ops ./timedqueue/ 'AddWork|UpdateWork|CancelWork' 200000x
run timedqueue-memory ./timedqueue/ 'Memory' 1x
run timedqueue-burst ./timedqueue/ 'Burst' 1x
run timedqueue-lateness ./timedqueue/ 'Lateness' 1x
# Against upstream's own TimedWorkerQueue and v1helper, in a module of its own
# (bench/upstream requires k8s.io/kubernetes; the root module does not).
(cd bench/upstream && go test -run '^$' -bench . -benchmem -count "$count" . | tee "$out/upstream.txt" >/dev/null)
benchstat -col /impl "$out/upstream.txt" > "$out/upstream.stat" || true
(cd examples && go test -run '^$' -bench 'EvictAll/nodes=5000' -benchtime 1x -count 3 ./internal/manager/ | tee "$out/noexecute-scale.txt" >/dev/null)
echo "results in $out/ (*.stat are the benchstat summaries)" >&2
