package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildController builds the controller's binary (this module's main
// package), with the race detector if race is true, and returns its path.
// The binary goes to the cache directory (next to the kube-apiserver), one
// per checkout and kind, overwritten by each build: a test binary that exits
// through [Main] could never remove a temporary one. The Go build cache makes
// a build after the first take seconds.
func BuildController(race bool) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	kind := "controller-"
	args := []string{"build"}
	if race {
		kind = "controller-race-"
		args = append(args, "-race")
	}
	sum := sha256.Sum256([]byte(wd))
	dir := filepath.Join(cache, kind+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "controller")
	out, err := exec.Command("go", append(args, "-o", bin, "github.com/taintkit/taintkit/examples/controller")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("testenv: building the controller: %w\n%s", err, out)
	}
	return bin, nil
}
