#!/usr/bin/env bash
# Builds the kube-apiserver that examples/controller's integration tests start,
# from k8s.io/kubernetes through the Go module proxy (no git clone, no internet
# beyond the proxy), into a cache directory, once.
#
# Usage: examples/controller/hack/build-kube-apiserver.sh
#   Prints the binary's path on stdout. Builds only if that file is missing.
#   TAINTKIT_CACHE  cache directory (default: ${XDG_CACHE_HOME:-$HOME/.cache}/taintkit)
#
# The version is the k8s.io/kubernetes requirement of bench/upstream/go.mod
# (the module of everything built from k8s.io/kubernetes, which names
# cmd/kube-apiserver as a tool); internal/testenv looks for the same file name. A cold build takes about 5
# minutes on 2 cores. No -trimpath: the API server resolves some files through
# its source path.
set -euo pipefail
mod="$(cd "$(dirname "$0")/../../../bench/upstream" && pwd)"
cd "$mod"

version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
cache="${TAINTKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/taintkit}"
out="$cache/kube-apiserver-$version"
if [ -x "$out" ]; then
	echo "$out"
	exit 0
fi

minor=${version#v*.}
minor=${minor%%.*}
major=${version#v}
major=${major%%.*}
pkg=k8s.io/component-base/version
mkdir -p "$cache"
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
echo "building kube-apiserver $version into $out" >&2
go build -o "$tmp" \
	-ldflags "-X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
	k8s.io/kubernetes/cmd/kube-apiserver
chmod +x "$tmp"
# A rename, so a concurrent or interrupted build never leaves half a binary at $out.
mv -f "$tmp" "$out"
trap - EXIT
echo "$out"
