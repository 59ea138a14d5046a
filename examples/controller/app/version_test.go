package app_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/taintkit/taintkit/examples/controller/app"
)

// --version: the name and version first, then the build's Go, module and
// VCS revision (or that it is unknown). (A test binary's build information
// lists no dependencies: integration/binary checks the library's and
// client-go's lines on the real binary.)
func TestVersionInfo(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(app.VersionInfo(), "\n"), "\n")
	assert.Regexp(t, `^taintkit-noexecute \S+$`, lines[0])
	got := strings.Join(lines, "\n")
	assert.Contains(t, got, "go:        "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	assert.Contains(t, got, "module:    github.com/taintkit/taintkit/examples ")
	assert.Regexp(t, `(?m)^revision:  \S+`, got)
}
