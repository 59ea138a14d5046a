#!/usr/bin/env bash
# Measures taintkit-noexecute beside upstream's taint-eviction controller on a
# real kube-apiserver and etcd holding NODES nodes and PODS pods (hack/scale),
# and plots the deletions (hack/scaleplot). Full size, as Kubernetes supports:
#   examples/controller/hack/scale.sh 5000 150000
# Usage: examples/controller/hack/scale.sh NODES PODS [OUT_DIR] [harness flags...]
# Prints the summary; OUT_DIR (default ./scale-NODES-PODS) holds results.csv,
# deletions.csv, deletions.png, summary.txt and every process's log.
set -euo pipefail
nodes=${1:?usage: scale.sh NODES PODS [OUT_DIR] [harness flags...]}
pods=${2:?usage: scale.sh NODES PODS [OUT_DIR] [harness flags...]}
out=${3:-scale-$nodes-$pods}
shift $(($# < 3 ? $# : 3))
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd) # examples/controller
root=$(cd "$here/../.." && pwd)

if [ -z "${TAINTKIT_KUBE_APISERVER:-}" ]; then
	TAINTKIT_KUBE_APISERVER=$("$here/hack/build-kube-apiserver.sh")
fi
# etcd 3.6 (hack/etcd): Debian's 3.4 cannot serve the streaming lists that
# both controllers' informers ask for first, and a run on it measures the
# full LIST they fall back to. TAINTKIT_ETCD=/usr/bin/etcd measures that.
if [ -z "${TAINTKIT_ETCD:-}" ]; then
	TAINTKIT_ETCD=$("$here/hack/build-etcd.sh")
fi
export TAINTKIT_KUBE_APISERVER TAINTKIT_ETCD

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# The binary's name is the first word of upstream's User-Agent.
(cd "$root/bench/upstream" && go build -o "$bin/upstream-taint-eviction" ./cmd/upstream-taint-eviction)
(cd "$here" && go build -o "$bin/taintkit-noexecute" . && go build -o "$bin/scale" ./hack/scale)
(cd "$here" && "$bin/scale" --nodes "$nodes" --pods "$pods" --out "$out" --deploy deploy \
	--taintkit "$bin/taintkit-noexecute" --upstream "$bin/upstream-taint-eviction" "$@")
# The plot, by scripts/scaleplot (the scripts module: the plotting library
# stays out of the examples), if there were deletions to plot (--phases
# startup has none).
if [ "$(wc -l <"$out/deletions.csv")" -gt 1 ]; then
	(cd "$root/scripts" && go run ./scaleplot --in "$out/deletions.csv" --out "$out/deletions.png")
fi
cat "$out/summary.txt"
