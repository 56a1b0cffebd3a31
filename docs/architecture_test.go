// Package docs_test checks that the repository's documentation says what the
// code does: docs/ARCHITECTURE.md's import table against `go list`, the
// README's Go snippets against the compiler, the README's output blocks
// against real runs of their commands, and the pictures in docs/ against
// the program that draws them.
package docs_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/tensorlife/tensorlife/"

// repoRoot is the module's root: docs/ is one level below it.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Dir(wd)
}

// goList runs go list in the module root and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// codeImports is each package's tensorlife imports (test files aside), by
// the package's path in the module, as go list -f {{.Imports}} gives them.
// Packages with only test files (docs itself) are left out.
func codeImports(t *testing.T) map[string][]string {
	out := map[string][]string{}
	for _, line := range goList(t, "-f", "{{.ImportPath}}|{{if or .GoFiles .CgoFiles}}1{{else}}0{{end}}|{{join .Imports \" \"}}", "./...") {
		path, rest, _ := strings.Cut(line, "|")
		files, imps, _ := strings.Cut(rest, "|")
		if files == "0" {
			continue
		}
		var own []string
		for _, imp := range strings.Fields(imps) {
			if p, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, p)
			}
		}
		slices.Sort(own)
		out[strings.TrimPrefix(path, module)] = own
	}
	return out
}

// docSection returns the lines of the section of md headed heading.
func docSection(t *testing.T, md, heading string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), md))
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") {
			in = l == "## "+heading
			continue
		}
		if in {
			lines = append(lines, l)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, lines, "%s has no section %q", md, heading)
	return lines
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// docImports reads the import table of ARCHITECTURE.md: one row a package,
// "| `pkg` | level | `imp`, `imp` |", and the level each package is at.
func docImports(t *testing.T) (imports map[string][]string, level map[string]int) {
	imports, level = map[string][]string{}, map[string]int{}
	for _, l := range docSection(t, "docs/ARCHITECTURE.md", "Imports") {
		cells := strings.Split(l, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		lv, err := strconv.Atoi(strings.TrimSpace(cells[2]))
		require.NoError(t, err, "level of %s", pkg)
		level[pkg] = lv
		var imps []string
		for _, m := range codeSpan.FindAllStringSubmatch(cells[3], -1) {
			imps = append(imps, m[1])
		}
		slices.Sort(imps)
		imports[pkg] = imps
	}
	return imports, level
}

// The import table of ARCHITECTURE.md is what the code imports, package by
// package, and its levels are layers: every import points to a lower level.
func TestArchitectureSaysWhatTheImportsSay(t *testing.T) {
	code := codeImports(t)
	doc, level := docImports(t)
	for pkg, imps := range code {
		want, ok := doc[pkg]
		if !assert.True(t, ok, "docs/ARCHITECTURE.md's import table has no row for %s", pkg) {
			continue
		}
		if want == nil {
			want = []string{}
		}
		if imps == nil {
			imps = []string{}
		}
		assert.Equal(t, imps, want, "the imports of %s", pkg)
		for _, imp := range imps {
			assert.Less(t, level[imp], level[pkg], "%s (level %d) imports %s (level %d): imports point down",
				pkg, level[pkg], imp, level[imp])
		}
	}
	for pkg := range doc {
		_, ok := code[pkg]
		assert.True(t, ok, "docs/ARCHITECTURE.md lists %s, which is no package", pkg)
	}
}

// The core imports the standard library and itself, nothing else: a
// program that only makes tensors links no OpenTelemetry, no net/http and
// no protobuf.
func TestCoreLinksOnlyTheStandardLibrary(t *testing.T) {
	core := []string{"./tensor", "./track", "./pool", "./mask"}
	for _, dep := range goList(t, append([]string{"-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, core...)...) {
		if dep == "" {
			continue
		}
		assert.True(t, strings.HasPrefix(dep, module), "the core links %s", dep)
	}
	for _, dep := range goList(t, append([]string{"-deps"}, core...)...) {
		assert.NotEqual(t, "net/http", dep, "the core links net/http")
	}
}
