#!/usr/bin/env bash
# apicheck: keeps the exported API of timedqueue, tolerations and sharding
# compatible with the last release recorded in RELEASES (one line per release:
# "vX.Y.Z <commit>"), as Go's import compatibility rule asks of a v1+ module.
#
# For each package it writes the API at the release's commit (taken from this
# repository's own history: the module is not on the module proxy) and
# compares the working tree with it using golang.org/x/exp/cmd/apidiff:
#   - an incompatible change fails, unless the module path in go.mod has a
#     newer major version (/v2, …) than the release: then there is nothing to
#     compare against, and the check says so;
#   - a compatible change (an addition) passes if CHANGELOG.md names it since
#     the release (Unreleased, or the section of a release being made), and
#     fails otherwise, so every addition is listed.
#
# Usage: scripts/apicheck.sh          (from anywhere in the repository)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

packages=(timedqueue tolerations sharding)

release=$(grep -E '^v[0-9]+\.[0-9]+\.[0-9]+ [0-9a-f]{40}$' RELEASES | tail -n 1 || true)
if [ -z "$release" ]; then
	echo "apicheck: no release recorded in RELEASES: nothing to compare with"
	exit 0
fi
version=${release%% *}
commit=${release##* }
major=${version%%.*}
major=${major#v}
module=$(go list -m)
current_major=1
if [[ $module =~ /v([0-9]+)$ ]]; then
	current_major=${BASH_REMATCH[1]}
fi
if [ "$current_major" -gt "$major" ]; then
	echo "apicheck: module $module is a new major version after $version: no compatibility to keep"
	exit 0
fi
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
	echo "apicheck: the commit of $version, $commit, is not in this repository's history" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apidiff is a tool of the scripts module (scripts/go.mod pins its version).
go -C scripts build -o "$tmp/apidiff" golang.org/x/exp/cmd/apidiff
apidiff="$tmp/apidiff"
mkdir "$tmp/old"
git archive "$commit" | tar -x -C "$tmp/old"

# What the changelog says since that release: from its Unreleased heading to
# the release's own, so that the commit that makes a release (whose changelog
# moves the Unreleased entries under the new version, and whose line RELEASES
# can only get in the next commit) passes too.
unreleased=$(awk -v v="${version#v}" '/^## \[Unreleased\]/{on=1; next} $0 ~ "^## \\[" v "\\]"{on=0} on' CHANGELOG.md)

failed=0
for pkg in "${packages[@]}"; do
	path="$module/$pkg"
	(cd "$tmp/old" && "$apidiff" -w "$tmp/$pkg.api" "github.com/taintkit/taintkit/$pkg")
	# apidiff names a generic type's method once per type parameter list: once is enough.
	report=$("$apidiff" "$tmp/$pkg.api" "$path" | awk '!seen[$0]++')
	incompatible=$("$apidiff" -incompatible "$tmp/$pkg.api" "$path" | awk '!seen[$0]++')
	if [ -n "$incompatible" ]; then
		echo "apicheck: $pkg: incompatible with $version ($commit):" >&2
		echo "$incompatible" >&2
		echo "apicheck: after v1 an incompatible change needs a new major version (a /v2 module path)" >&2
		failed=1
		continue
	fi
	# Compatible changes: apidiff lists them as "- NAME: added" (or changed).
	while IFS= read -r line; do
		name=${line#- }
		name=${name%%:*}
		short=${name##*.}
		if ! grep -qF -- "$short" <<<"$unreleased"; then
			echo "apicheck: $pkg: $line — not listed in CHANGELOG.md's Unreleased section" >&2
			failed=1
		fi
	done < <(grep -E '^- ' <<<"$report" || true)
	if [ -n "$report" ]; then
		echo "apicheck: $pkg: compatible with $version:"
		echo "$report"
	else
		echo "apicheck: $pkg: unchanged since $version"
	fi
done
exit "$failed"
