package app

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// VersionInfo returns what --version prints: the controller's name and
// version, then, from the binary's build information
// (runtime/debug.ReadBuildInfo), the Go version and platform, the main
// module, the VCS revision it was built from, and the versions of the
// taintkit library and client-go in it. A build without VCS information
// (go build -buildvcs=false, go run, a test) says so.
func VersionInfo() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", Component, version())
	fmt.Fprintf(&b, "go:        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	info, ok := debug.ReadBuildInfo()
	if !ok {
		b.WriteString("no build information in the binary\n")
		return b.String()
	}
	fmt.Fprintf(&b, "module:    %s %s\n", info.Main.Path, info.Main.Version)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		var extra []string
		if t := settings["vcs.time"]; t != "" {
			extra = append(extra, t)
		}
		if settings["vcs.modified"] == "true" {
			extra = append(extra, "modified")
		}
		fmt.Fprintf(&b, "revision:  %s", rev)
		if len(extra) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(extra, ", "))
		}
		b.WriteByte('\n')
	} else {
		b.WriteString("revision:  unknown (built without VCS information)\n")
	}
	for _, d := range info.Deps {
		var name string
		switch d.Path {
		case "github.com/taintkit/taintkit":
			name = "taintkit:  "
		case "k8s.io/client-go":
			name = "client-go: "
		default:
			continue
		}
		fmt.Fprintf(&b, "%s%s %s", name, d.Path, d.Version)
		if d.Replace != nil {
			fmt.Fprintf(&b, " => %s", strings.TrimSpace(d.Replace.Path+" "+d.Replace.Version))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
