package taintkit_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Go code of the repository's documentation (docFiles) is tested code.
// Every ```go block in it is preceded by a marker naming the function whose
// body it is, in a _test.go file of the package in the named directory
// (relative to the repository's root, whichever file quotes it):
//
//	<!-- example: tolerations.Example_quickStart -->  an Example with // Output:
//	<!-- test: timedqueue.TestReadmeFakeClock -->     a Test
//	<!-- func: examples/controller-runtime.runControllers -->
//	                                                  a function a Test of that
//	                                                  directory calls
//
// go test compiles and runs those functions; TestReadmeCodeIsTested checks
// that each block is, line for line, the function's body (modulo the body's
// indentation). Other blocks (shell commands, output) are not Go and not
// checked. A directory may be another module's (examples/controller-runtime,
// whose dependencies this module must not have): this test reads its files,
// and that module's go test, which .ci/run runs, compiles and runs them.

// docFiles are the Markdown files whose code, links and commands are checked.
var docFiles = []string{"README.md", "CONTRIBUTING.md", "examples/README.md", "bench/README.md"}

func TestReadmeCodeIsTested(t *testing.T) {
	goBlocks := 0
	seen := map[string]string{}
	for _, file := range docFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks, problems := parseReadme(data)
		problems = append(problems, checkGoBlocks(blocks)...)
		for _, p := range problems {
			t.Error(file + p)
		}
		for _, b := range blocks {
			if b.marker == "" {
				continue
			}
			name := b.dir + "." + b.fn
			if prev, ok := seen[name]; ok {
				t.Errorf("%s:%d: %s is already quoted in %s", file, b.line, name, prev)
			}
			seen[name] = fmt.Sprintf("%s:%d", file, b.line)
		}
		goBlocks += countLang(blocks, "go")
	}
	if goBlocks == 0 {
		t.Error("no go block in the documentation: is the parser broken?")
	}
}

// The checker itself: it must catch drift, unmarked blocks, stray markers and
// markers that name nothing, or the test above proves nothing.
func TestReadmeCheckerCatchesMistakes(t *testing.T) {
	body, _, err := funcBody("tolerations", "Example_quickStart")
	if err != nil {
		t.Fatal(err)
	}
	drifted := strings.Replace(body, "tolerations.GetNoExecuteTaints(node.Spec.Taints)", "node.Spec.Taints", 1)
	if drifted == body {
		t.Fatal("the drift below changes nothing: update this test")
	}
	md := "# t\n\n" +
		"```go\nfmt.Println(1)\n```\n\n" + // line 3
		"<!-- example: tolerations.ExampleNoSuchThing -->\n```go\nx := 1\n```\n\n" + // line 8
		"<!-- test: tolerations.ExampleDecide -->\n```go\nx := 1\n```\n\n" + // line 13
		"<!-- example: tolerations.ExampleDecide -->\nsome prose\n\n" + // line 17
		"<!-- func: tolerations.ExampleMatcher -->\n```go\nx := 1\n```\n\n" + // line 21
		"<!-- example: tolerations.Example_quickStart -->\n```go\n" + drifted + "\n```\n" // line 26
	blocks, problems := parseReadme([]byte(md))
	problems = append(problems, checkGoBlocks(blocks)...)
	for _, want := range []string{
		":3: go block has no marker",
		":8: no func ExampleNoSuchThing in tolerations",
		":13: marker \"test\" names ExampleDecide, which is not a Test function",
		":17: marker \"<!-- example: tolerations.ExampleDecide -->\" is not followed by a code block",
		":26: the go block drifted from the body of Example_quickStart",
		"README: taints := node.Spec.Taints",
		":21: no Test function in tolerations/*_test.go calls ExampleMatcher",
		":21: the go block drifted from the body of ExampleMatcher",
	} {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p, want)
		}
		if !found {
			t.Errorf("no problem reported containing %q; got:\n%s", want, strings.Join(problems, "\n"))
		}
	}
	if len(problems) != 7 {
		t.Errorf("got %d problems, want 7:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// The README's shell blocks are commands a newcomer runs from a checkout
// (the root of the repository): the directories they name must exist, those
// after go -C DIR inside DIR.
func TestReadmeCommandsNameExistingPackages(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := parseReadme(data)
	if countLang(blocks, "sh") == 0 {
		t.Fatal("README.md has no sh block: is the parser broken?")
	}
	checked := 0
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		for _, line := range strings.Split(b.code, "\n") {
			for _, dir := range commandDirs(line) {
				checked++
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					t.Errorf("README.md:%d: %q names %s, which is not a directory", b.line, line, dir)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("README.md's commands name no directory: is the parser broken?")
	}
}

// commandDirs returns the directories a go run, test or vet command line
// names, relative to the repository's root: the directory it runs in (a
// subshell's cd, or -C), and the package patterns inside it.
func commandDirs(line string) []string {
	m := commandRE.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return nil
	}
	base := m[1] + m[2] // at most one of them is set
	dirs := []string{}
	if base != "" {
		dirs = append(dirs, base)
	}
	for _, arg := range strings.Fields(m[3]) {
		if strings.HasPrefix(arg, "#") {
			break
		}
		if !strings.HasPrefix(arg, "./") {
			continue
		}
		arg = strings.TrimSuffix(arg, ")") // the subshell's end
		dirs = append(dirs, filepath.Join(base, strings.TrimSuffix(arg, "...")))
	}
	return dirs
}

var commandRE = regexp.MustCompile(`^(?:\(cd (\S+) && )?go (?:-C (\S+) )?(?:run|test|vet) (.*)$`)

// Relative links in the documentation point at files of the repository.
func TestReadmeLinksResolve(t *testing.T) {
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range docFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(file), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", file, m[1])
			}
		}
	}
}

// readmeBlock is a fenced code block of a Markdown file.
type readmeBlock struct {
	line   int    // 1-based line of the opening fence
	lang   string // the fence's info string: "go", "sh", …
	marker string // "example", "test" or "func", or "" if the block has no marker
	dir    string // the package directory the marker names
	fn     string // the function the marker names
	code   string
}

var markerRE = regexp.MustCompile(`^<!--\s*(example|test|func):\s*(\S+)\.(\w+)\s*-->$`)

// parseReadme returns the fenced code blocks of a Markdown file, each with the
// marker on the last non-blank line before it, if any, and the problems found
// on the way, each starting ":line: ".
func parseReadme(data []byte) (blocks []readmeBlock, problems []string) {
	var (
		cur     *readmeBlock
		code    []string
		lastTxt string // the last non-blank line outside a block
		lastN   int
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{line: n, lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			if m := markerRE.FindStringSubmatch(lastTxt); m != nil {
				cur.marker, cur.dir, cur.fn = m[1], m[2], m[3]
			}
			code = code[:0]
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = strings.Join(code, "\n")
			blocks = append(blocks, *cur)
			cur, lastTxt = nil, ""
		case cur != nil:
			code = append(code, line)
		case strings.TrimSpace(line) != "":
			if markerRE.MatchString(lastTxt) {
				problems = append(problems, fmt.Sprintf(":%d: marker %q is not followed by a code block", lastN, lastTxt))
			}
			lastTxt, lastN = strings.TrimSpace(line), n
		}
	}
	if cur != nil {
		problems = append(problems, fmt.Sprintf(":%d: code block never closed", cur.line))
	}
	if markerRE.MatchString(lastTxt) {
		problems = append(problems, fmt.Sprintf(":%d: marker %q is not followed by a code block", lastN, lastTxt))
	}
	return blocks, problems
}

// checkGoBlocks checks that every go block is marked and is the body of the
// function its marker names; it returns the problems, each starting ":line: ".
func checkGoBlocks(blocks []readmeBlock) []string {
	var problems []string
	report := func(b readmeBlock, format string, args ...any) {
		problems = append(problems, fmt.Sprintf(":%d: ", b.line)+fmt.Sprintf(format, args...))
	}
	seen := map[string]int{}
	for _, b := range blocks {
		if b.lang != "go" {
			if b.marker != "" {
				report(b, "%s block is marked; only go blocks are checked", b.lang)
			}
			continue
		}
		if b.marker == "" {
			report(b, "go block has no marker: put <!-- example: dir.ExampleName --> (or <!-- test: dir.TestName -->) "+
				"on the line before it, and make the block that function's body")
			continue
		}
		name := b.dir + "." + b.fn
		if prev, ok := seen[name]; ok {
			report(b, "%s is already quoted at line %d", name, prev)
		}
		seen[name] = b.line
		kind, article := "Test", "a"
		if b.marker == "example" {
			kind, article = "Example", "an"
		}
		if b.marker != "func" && !strings.HasPrefix(b.fn, kind) {
			report(b, "marker %q names %s, which is not %s %s function", b.marker, b.fn, article, kind)
			continue
		}
		body, file, err := funcBody(b.dir, b.fn)
		if err != nil {
			report(b, "%v", err)
			continue
		}
		if b.marker == "func" {
			if ok, err := calledByTest(b.dir, b.fn); err != nil {
				report(b, "%v", err)
			} else if !ok {
				report(b, "no Test function in %s/*_test.go calls %s, so go test does not run it", b.dir, b.fn)
			}
		}
		if kind == "Example" && !outputRE.MatchString(body) {
			report(b, "%s in %s has no // Output: comment, so go test compiles it but does not run it", b.fn, file)
		}
		want := dedent(body)
		if diff := firstDiff(dedent(b.code), want); diff != "" {
			report(b, "the go block drifted from the body of %s in %s:\n%s\nMake them the same again; the function's body, unindented, is:\n%s",
				b.fn, file, diff, strings.Join(want, "\n"))
		}
	}
	return problems
}

var outputRE = regexp.MustCompile(`(?m)^\s*// (Unordered output|Output):`)

// funcBody returns the body, without its braces, of the top-level function fn
// declared in a _test.go file of dir, and that file's name.
func funcBody(dir, fn string) (body, file string, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return "", "", err
	}
	fset := token.NewFileSet()
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			return "", "", err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return "", "", err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != fn || fd.Body == nil {
				continue
			}
			start := fset.Position(fd.Body.Lbrace).Offset + 1
			end := fset.Position(fd.Body.Rbrace).Offset
			return string(src[start:end]), path, nil
		}
	}
	return "", "", fmt.Errorf("no func %s in %s/*_test.go", fn, dir)
}

// calledByTest reports whether a Test function declared in a _test.go file
// of dir calls the function fn.
func calledByTest(dir, fn string) (bool, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return false, err
	}
	fset := token.NewFileSet()
	for _, path := range paths {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return false, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "Test") || fd.Body == nil {
				continue
			}
			called := false
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := call.Fun.(*ast.Ident); ok && id.Name == fn {
						called = true
					}
				}
				return !called
			})
			if called {
				return true, nil
			}
		}
	}
	return false, nil
}

// dedent splits s into lines, trims trailing blanks, blank lines at both ends
// and the indentation common to every non-blank line.
func dedent(s string) []string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t")
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	prefix, first := "", true
	for _, l := range lines {
		if l == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = ind, false
		}
		for !strings.HasPrefix(ind, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return lines
}

// firstDiff describes the first line where a README block and a function body
// differ, or returns "".
func firstDiff(readme, body []string) string {
	line := func(lines []string, i int, end string) string {
		if i < len(lines) {
			return lines[i]
		}
		return end
	}
	for i := range max(len(readme), len(body)) {
		r, b := line(readme, i, "(end of block)"), line(body, i, "(end of body)")
		if r != b {
			return fmt.Sprintf("  line %d of the block:\n    README: %s\n    func:   %s", i+1, r, b)
		}
	}
	return ""
}

func countLang(blocks []readmeBlock, lang string) int {
	n := 0
	for _, b := range blocks {
		if b.lang == lang {
			n++
		}
	}
	return n
}

// The command parser must see the directories a newcomer's command names, or
// TestReadmeCommandsNameExistingPackages proves nothing.
func TestCommandDirs(t *testing.T) {
	for line, want := range map[string][]string{
		"go -C examples run ./noexecute   # the demo":  {"examples", "examples/noexecute"},
		"(cd examples && go run ./noexecute)   # demo": {"examples", "examples/noexecute"},
		"go test ./...                    # the tests": {"."},
		"go test ./timedqueue/... ./sharding":          {"timedqueue", "sharding"},
		"go -C examples test ./internal/... # ./x":     {"examples", "examples/internal"},
		"bash .ci/run": nil,
	} {
		got := commandDirs(line)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("commandDirs(%q) = %q, want %q", line, got, want)
		}
	}
}
