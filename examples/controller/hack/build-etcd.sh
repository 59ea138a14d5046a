#!/usr/bin/env bash
# Builds the etcd server that examples/controller's scale harness starts (and
# that its tests start if TAINTKIT_ETCD names it), from go.etcd.io/etcd/server/v3
# through the Go module proxy, into a cache directory, once.
#
# Usage: examples/controller/hack/build-etcd.sh
#   Prints the binary's path on stdout. Builds only if that file is missing.
#   TAINTKIT_CACHE  cache directory (default: ${XDG_CACHE_HOME:-$HOME/.cache}/taintkit)
#
# The version is the go.etcd.io/etcd/server/v3 requirement of hack/etcd/go.mod.
# Debian's etcd-server (3.4) cannot serve the API server's streaming lists,
# which client-go's informers ask for first: a scale run on it measures the
# full LIST they fall back to.
set -euo pipefail
cd "$(dirname "$0")/etcd"

version=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
cache="${TAINTKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/taintkit}"
out="$cache/etcd-$version"
if [ -x "$out" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
echo "building etcd $version into $out" >&2
go build -trimpath -o "$tmp" .
chmod +x "$tmp"
# A rename, so a concurrent or interrupted build never leaves half a binary at $out.
mv -f "$tmp" "$out"
trap - EXIT
echo "$out"
