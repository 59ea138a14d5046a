// Command gogetcheck proves that the modules users import from this
// repository can be fetched with "go get" and used, as a module proxy would
// serve them.
//
// From a clean clone of the repository's HEAD (what a tag would publish; no
// untracked or ignored file), it zips each module with golang.org/x/mod/zip
// (the code the go command and every module proxy use, so a file name that
// is invalid on some system, a file too large, or a go.mod that is not
// there refuses the zip as it would refuse a "go get"), serves the zips from
// a file:// proxy, and in a fresh module outside the repository runs
// "go get" of the module and then "go run" of a first program that imports
// it (testdata/NAME/main.go). Replace directives play no part: a module
// that requires another of this repository gets it from the same proxy, at
// the version it requires.
//
// Usage, from anywhere in the repository:
//
//	go -C scripts run ./gogetcheck [-keep] [-repo DIR] [-rev REV]
//
// It needs git and a go command; dependencies outside this repository come
// from the local module cache first, then from GOPROXY.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// checked are the modules users import, by directory in the repository,
// each with the first program (testdata/NAME) that must build and run
// against it once fetched.
var checked = []struct {
	dir, program string
}{
	{".", "taintkit"},
	{"workqueue", "workqueue"},
}

// version is the version each checked module is served at (besides the
// versions other modules of the repository require of it).
const version = "v0.0.0-gogetcheck"

func main() {
	keep := flag.Bool("keep", false, "keep the work directory and print its path")
	repo := flag.String("repo", "", "the repository (default: the one holding the working directory)")
	rev := flag.String("rev", "HEAD", "the revision to clone")
	flag.Parse()
	if err := run(*repo, *rev, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "gogetcheck:", err)
		os.Exit(1)
	}
}

func run(repo, rev string, keep bool) error {
	if repo == "" {
		out, err := output("", "git", "rev-parse", "--show-toplevel")
		if err != nil {
			return err
		}
		repo = strings.TrimSpace(out)
	}
	programs, err := filepath.Abs("gogetcheck/testdata")
	if err != nil {
		return err
	}
	if _, err := os.Stat(programs); err != nil {
		programs = filepath.Join(repo, "scripts", "gogetcheck", "testdata")
	}
	work, err := os.MkdirTemp("", "gogetcheck-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("work directory:", work)
	} else {
		defer removeAll(work)
	}

	clone := filepath.Join(work, "clone")
	if _, err := output("", "git", "clone", "--quiet", "--no-checkout", repo, clone); err != nil {
		return err
	}
	if _, err := output(clone, "git", "checkout", "--quiet", rev); err != nil {
		return err
	}

	// Every module of the repository, by path: the versions others
	// require of it are served too.
	proxy := filepath.Join(work, "proxy")
	mods, err := modules(clone)
	if err != nil {
		return err
	}
	for _, c := range checked {
		m, ok := mods[filepath.Join(clone, c.dir)]
		if !ok {
			return fmt.Errorf("no go.mod in %s", c.dir)
		}
		versions := []string{version}
		for _, other := range mods {
			for _, r := range other.Require {
				if r.Mod.Path == m.Module.Mod.Path {
					versions = append(versions, r.Mod.Version)
				}
			}
		}
		for _, v := range versions {
			if err := serve(proxy, filepath.Join(clone, c.dir), m.Module.Mod.Path, v); err != nil {
				return err
			}
		}
	}

	env, err := goEnv(work, proxy, mods)
	if err != nil {
		return err
	}
	for _, c := range checked {
		path := mods[filepath.Join(clone, c.dir)].Module.Mod.Path
		if err := use(work, env, path, filepath.Join(programs, c.program)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// modules returns the go.mod of every module in the tree at root, by
// directory.
func modules(root string) (map[string]*modfile.File, error) {
	mods := make(map[string]*modfile.File)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := modfile.ParseLax(path, data, nil)
		if err != nil {
			return err
		}
		mods[filepath.Dir(path)] = f
		return nil
	})
	return mods, err
}

// serve writes the module in dir, as path@v, into the file proxy at proxy:
// its zip, go.mod, .info and the list of versions.
func serve(proxy, dir, path, v string) error {
	mv := module.Version{Path: path, Version: v}
	check, err := modzip.CheckDir(dir)
	if err != nil {
		// CheckDir lists what a zip would refuse; CreateFromDir below says so too.
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	z, err := os.Create(filepath.Join(at, v+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(z, mv, dir); err != nil {
		z.Close()
		return fmt.Errorf("zip of %s: %w", mv, err)
	}
	if err := z.Close(); err != nil {
		return err
	}
	st, err := os.Stat(z.Name())
	if err != nil {
		return err
	}
	fmt.Printf("%s: zip of %d files, %d bytes (%d left out: nested modules, vcs and vendor directories)\n",
		mv, len(check.Valid), st.Size(), len(check.Omitted))
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, v+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, v)
	if err := os.WriteFile(filepath.Join(at, v+".info"), []byte(info), 0o644); err != nil {
		return err
	}
	list, err := os.OpenFile(filepath.Join(at, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(list, v); err != nil {
		list.Close()
		return err
	}
	return list.Close()
}

// goEnv returns the environment of the go commands run in the fresh module:
// a module cache of their own (the proxy's versions must not meet a cached
// one of the same name), the file proxy first, then the machine's module
// cache as a proxy, then GOPROXY; no checksum database for this
// repository's modules, which only the file proxy serves.
func goEnv(work, proxy string, mods map[string]*modfile.File) ([]string, error) {
	out, err := output("", "go", "env", "GOMODCACHE", "GOPROXY")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("go env: unexpected output %q", out)
	}
	cacheProxy := "file://" + filepath.ToSlash(filepath.Join(lines[0], "cache", "download"))
	var own []string
	for _, m := range mods {
		own = append(own, m.Module.Mod.Path)
	}
	env := os.Environ()
	env = append(env,
		"GOMODCACHE="+filepath.Join(work, "modcache"),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+cacheProxy+","+lines[1],
		"GONOSUMDB="+strings.Join(own, ","),
		"GOFLAGS=-modcacherw",
		"GOWORK=off",
	)
	return env, nil
}

// use makes a fresh module, gets path into it and runs the program in
// programDir there.
func use(work string, env []string, path, programDir string) error {
	dir, err := os.MkdirTemp(work, "user-")
	if err != nil {
		return err
	}
	src, err := os.ReadFile(filepath.Join(programDir, "main.go"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"mod", "init", "example.com/firstprogram"},
		{"get", path + "@" + version},
		{"mod", "tidy"},
		{"run", "."},
	} {
		out, err := goCmd(dir, env, args...)
		fmt.Printf("$ go %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

func goCmd(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// removeAll removes the work directory; module caches are read-only
// unless -modcacherw, which goEnv sets, so a failure is only reported.
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "gogetcheck: cleaning up:", err)
	}
}
