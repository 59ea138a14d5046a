package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// KubernetesVersion is the version of the kube-apiserver the tests run. It
// matches the k8s.io/kubernetes requirement of bench/upstream/go.mod.
const KubernetesVersion = "v1.37.2"

// BuildCommand is the command, run from the repository root, that builds the
// kube-apiserver into the file [Start] looks for.
const BuildCommand = "examples/controller/hack/build-kube-apiserver.sh"

// MissingBinaryError reports that etcd or the kube-apiserver was not found.
// [Start] returns it; its message says how to get the binary.
type MissingBinaryError struct {
	// Name is "etcd" or "kube-apiserver".
	Name string
	// Path is where it was looked for; empty if it was looked for on $PATH.
	Path string
	// Hint says how to install or build it.
	Hint string
}

func (e *MissingBinaryError) Error() string {
	where := "on $PATH"
	if e.Path != "" {
		where = "at " + e.Path
	}
	return fmt.Sprintf("testenv: %s not found %s; %s", e.Name, where, e.Hint)
}

// cacheDir is where build-kube-apiserver.sh writes; keep the two in step.
func cacheDir() (string, error) {
	if d := os.Getenv("TAINTKIT_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "taintkit"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("testenv: no cache directory for the kube-apiserver (set TAINTKIT_CACHE or TAINTKIT_KUBE_APISERVER): %w", err)
	}
	return filepath.Join(home, ".cache", "taintkit"), nil
}

func findKubeAPIServer(given string) (string, error) {
	path := given
	if path == "" {
		path = os.Getenv("TAINTKIT_KUBE_APISERVER")
	}
	if path == "" {
		dir, err := cacheDir()
		if err != nil {
			return "", err
		}
		path = filepath.Join(dir, "kube-apiserver-"+KubernetesVersion)
	}
	if err := executable(path); err != nil {
		return "", &MissingBinaryError{
			Name: "kube-apiserver",
			Path: path,
			Hint: "build it once with " + BuildCommand + " (about 5 minutes on 2 cores) or set TAINTKIT_KUBE_APISERVER",
		}
	}
	return path, nil
}

func findEtcd(given string) (string, error) {
	path := given
	if path == "" {
		path = os.Getenv("TAINTKIT_ETCD")
	}
	hint := "install it with apt-get install etcd-server or set TAINTKIT_ETCD"
	if path == "" {
		found, err := exec.LookPath("etcd")
		if err != nil {
			// Debian's package puts it here, which is not on every $PATH.
			found = "/usr/bin/etcd"
			if executable(found) != nil {
				return "", &MissingBinaryError{Name: "etcd", Hint: hint}
			}
		}
		return found, nil
	}
	if err := executable(path); err != nil {
		return "", &MissingBinaryError{Name: "etcd", Path: path, Hint: hint}
	}
	return path, nil
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}
