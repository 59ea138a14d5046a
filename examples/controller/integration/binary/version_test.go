package binary_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --version on the binary as built: its build information names the
// library it was built with (from go.mod's replace) and client-go.
func TestBinaryVersion(t *testing.T) {
	out, err := exec.Command(controllerBin, "--version").Output()
	require.NoError(t, err)
	assert.Regexp(t, `^taintkit-noexecute \S+\ngo: `, string(out))
	assert.Regexp(t, `(?m)^module:    github.com/taintkit/taintkit/examples `, string(out))
	assert.Regexp(t, `(?m)^taintkit:  github.com/taintkit/taintkit \S+ => \.\.`, string(out))
	assert.Regexp(t, `(?m)^client-go: k8s.io/client-go v0\.\d+\.\d+$`, string(out))
}
