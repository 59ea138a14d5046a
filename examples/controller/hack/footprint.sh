#!/usr/bin/env bash
# Measures taintkit-noexecute's footprint beside upstream's taint-eviction
# controller, each alone on the same real kube-apiserver and etcd: binary
# size, RSS with no pods, at 1,000 pods on 20 nodes and at 10,000 pods on
# 100 nodes (once its caches are synced, and after a minute at rest), and
# CPU until idle at start-up; and, with --before REV, the same for the
# controller built at that revision. Prints a Markdown table
# (hack/footprint), the one in examples/controller/README.md.
# Usage: examples/controller/hack/footprint.sh [--before REV] [OUT_DIR] [NODES/PODS ...]
#   default sizes: 20/1000 100/10000; add 5000/150000 for the full size
#   (about an hour more: the cluster is created first).
set -euo pipefail
before=""
if [ "${1:-}" = "--before" ]; then
	before=${2:?--before needs a revision}
	shift 2
fi
out=${1:-footprint}
shift $(($# < 1 ? $# : 1))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(20/1000 100/10000)
mkdir -p "$out/bin"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd) # examples/controller
root=$(cd "$here/../.." && pwd)

if [ -z "${TAINTKIT_KUBE_APISERVER:-}" ]; then
	TAINTKIT_KUBE_APISERVER=$("$here/hack/build-kube-apiserver.sh")
fi
if [ -z "${TAINTKIT_ETCD:-}" ]; then
	TAINTKIT_ETCD=$("$here/hack/build-etcd.sh")
fi
export TAINTKIT_KUBE_APISERVER TAINTKIT_ETCD

# The binaries as a user builds them (go build, no flags). The upstream
# binary's name is the first word of its User-Agent.
(cd "$root/bench/upstream" && go build -o "$out/bin/upstream-taint-eviction" ./cmd/upstream-taint-eviction)
(cd "$here" && go build -o "$out/bin/taintkit-noexecute" . && go build -o "$out/bin/scale" ./hack/scale)
beforeFlag=()
if [ -n "$before" ]; then
	tree=$(mktemp -d)
	trap 'git -C "$root" worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
	git -C "$root" worktree add --detach "$tree" "$before" >/dev/null
	(cd "$tree/examples/controller" && go build -o "$out/bin/taintkit-before" .)
	beforeFlag=(--taintkit-before "$out/bin/taintkit-before")
fi

for size in "${sizes[@]}"; do
	nodes=${size%/*}
	pods=${size#*/}
	(cd "$here" && "$out/bin/scale" --nodes "$nodes" --pods "$pods" --out "$out/$nodes-$pods" --deploy deploy \
		--phases startup --rounds 1 --idle 60s \
		--taintkit "$out/bin/taintkit-noexecute" --upstream "$out/bin/upstream-taint-eviction" "${beforeFlag[@]}")
done
(cd "$here" && go run ./hack/footprint "$out")
