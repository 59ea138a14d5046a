package app

import (
	"runtime/debug"
	"strings"
)

// UserAgent returns the User-Agent of every request a replica with the given
// leader election identity makes: "taintkit-noexecute/VERSION (IDENTITY)",
// and for its leader election's requests the same followed by
// " leader-election". An API server's audit log then says which replica made
// each request. VERSION is the main module's version from the build
// information ("devel" for a build that has none, as go test's).
func UserAgent(identity string) string {
	return Component + "/" + version() + " (" + identity + ")"
}

// leaderElectionUserAgentSuffix follows [UserAgent] on the leader election's
// requests.
const leaderElectionUserAgentSuffix = " leader-election"

func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || strings.ContainsAny(info.Main.Version, "() ") {
		return "devel" // "(devel)" is what a build from a work tree without VCS data says
	}
	return info.Main.Version
}
