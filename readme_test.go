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

// README.md's Go code is tested code. Every ```go block in it is preceded by
// a marker naming the function whose body it is, in a _test.go file of the
// package in the named directory:
//
//	<!-- example: tolerations.Example_quickStart -->  an Example with // Output:
//	<!-- test: timedqueue.TestReadmeFakeClock -->     a Test
//
// go test compiles and runs those functions; this test checks that each block
// is, line for line, the function's body (modulo the body's indentation).

// readmeBlock is a fenced code block of README.md.
type readmeBlock struct {
	line   int    // 1-based line of the opening fence
	lang   string // the fence's info string: "go", "sh", …
	marker string // "example" or "test", or "" if the block has no marker
	dir    string // the package directory the marker names
	fn     string // the function the marker names
	code   string
}

var markerRE = regexp.MustCompile(`^<!--\s*(example|test):\s*(\S+)\.(\w+)\s*-->$`)

// readmeBlocks returns README.md's fenced code blocks, each with the marker on
// the last non-blank line before it, if any.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []readmeBlock
		cur     *readmeBlock
		code    []string
		lastTxt string // the last non-blank line outside a block
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{line: n, lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(lastTxt)); m != nil {
				cur.marker, cur.dir, cur.fn = m[1], m[2], m[3]
			}
			code = code[:0]
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = strings.Join(code, "\n")
			blocks = append(blocks, *cur)
			cur, lastTxt = nil, line
		case cur != nil:
			code = append(code, line)
		case strings.TrimSpace(line) != "":
			if markerRE.MatchString(strings.TrimSpace(lastTxt)) {
				t.Errorf("README.md:%d: marker %q is not followed by a code block", n-1, lastTxt)
			}
			lastTxt = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("README.md:%d: code block never closed", cur.line)
	}
	return blocks
}

// funcBody returns the body of the top-level function fn declared in a
// _test.go file of dir, without its braces, and the file's name.
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

// dedent trims blank lines at both ends and trailing spaces, and removes the
// indentation common to every non-blank line.
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

func TestReadmeCodeIsTested(t *testing.T) {
	blocks := readmeBlocks(t)
	seen := map[string]int{}
	goBlocks := 0
	for _, b := range blocks {
		if b.lang != "go" {
			if b.marker != "" {
				t.Errorf("README.md:%d: %s block is marked %s %s.%s; only go blocks are checked", b.line, b.lang, b.marker, b.dir, b.fn)
			}
			continue
		}
		goBlocks++
		name := b.dir + "." + b.fn
		if b.marker == "" {
			t.Errorf("README.md:%d: go block has no marker; put <!-- example: dir.ExampleName --> "+
				"(or <!-- test: dir.TestName -->) on the line before it and make the block that function's body", b.line)
			continue
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("README.md:%d: %s is already quoted at README.md:%d", b.line, name, prev)
		}
		seen[name] = b.line
		want := "Test"
		if b.marker == "example" {
			want = "Example"
		}
		if !strings.HasPrefix(b.fn, want) {
			t.Errorf("README.md:%d: marker %q names %s, which is not an %s function", b.line, b.marker, b.fn, want)
			continue
		}
		body, file, err := funcBody(b.dir, b.fn)
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		if b.marker == "example" && !regexp.MustCompile(`(?m)^\s*// (Unordered output|Output):`).MatchString(body) {
			t.Errorf("README.md:%d: %s in %s has no // Output: comment, so go test does not run it", b.line, b.fn, file)
		}
		got, wantLines := dedent(b.code), dedent(body)
		if diff := firstDiff(got, wantLines); diff != "" {
			t.Errorf("README.md:%d: the go block drifted from the body of %s in %s:\n%s\n"+
				"Make them the same again; the function's body, unindented, is:\n%s",
				b.line, b.fn, file, diff, strings.Join(wantLines, "\n"))
		}
	}
	if goBlocks == 0 {
		t.Error("README.md has no go blocks: is the parser broken?")
	}
}

// firstDiff describes the first line where the README block and the function
// body differ, or returns "".
func firstDiff(readme, body []string) string {
	for i := 0; i < max(len(readme), len(body)); i++ {
		var r, b string
		if i < len(readme) {
			r = readme[i]
		} else {
			r = "(end of block)"
		}
		if i < len(body) {
			b = body[i]
		} else {
			b = "(end of body)"
		}
		if r != b {
			return fmt.Sprintf("  line %d of the block:\n    README: %s\n    func:   %s", i+1, r, b)
		}
	}
	return ""
}

// The README's shell blocks are commands a newcomer runs from a checkout: the
// packages they name must exist.
func TestReadmeCommandsNameExistingPackages(t *testing.T) {
	cmdRE := regexp.MustCompile(`^go (?:run|test|vet) (\./\S*)`)
	for _, b := range readmeBlocks(t) {
		if b.lang != "sh" {
			continue
		}
		for _, line := range strings.Split(b.code, "\n") {
			m := cmdRE.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			dir := strings.TrimSuffix(strings.TrimSuffix(m[1], "..."), "/")
			if dir == "." || dir == "" {
				continue
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Errorf("README.md:%d: %q names %s, which is not a directory", b.line, line, dir)
			}
		}
	}
}

// Relative links in the README point at files of the repository.
func TestReadmeLinksResolve(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, m := range linkRE.FindAllStringSubmatch(string(data), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "#") {
			continue
		}
		target, _, _ = strings.Cut(target, "#")
		if _, err := os.Stat(target); err != nil {
			t.Errorf("README.md links to %s, which does not exist", m[1])
		}
	}
}
