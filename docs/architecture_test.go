// Package docs_test checks that the repository's documentation says what the
// code does: docs/ARCHITECTURE.md's import table against `go list`, the
// README's Go snippets against the compiler, the README's output blocks
// against real runs of their commands, and the pictures in docs/ against
// the program that draws them.
package docs_test

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

var update = flag.Bool("update", false, "rewrite the generated parts of docs/ARCHITECTURE.md")

// levels gives each package its level: 0 for a package that imports none
// of the module, else one more than the highest of its imports. An import
// cycle cannot compile, so the recursion ends.
func levels(code map[string][]string) map[string]int {
	level := map[string]int{}
	var of func(pkg string) int
	of = func(pkg string) int {
		if lv, ok := level[pkg]; ok {
			return lv
		}
		lv := 0
		for _, imp := range code[pkg] {
			lv = max(lv, of(imp)+1)
		}
		level[pkg] = lv
		return lv
	}
	for pkg := range code {
		of(pkg)
	}
	return level
}

// byLevel returns the packages in level order, then by path.
func byLevel(level map[string]int) []string {
	pkgs := slices.Collect(maps.Keys(level))
	slices.SortFunc(pkgs, func(a, b string) int { return cmp.Or(cmp.Compare(level[a], level[b]), strings.Compare(a, b)) })
	return pkgs
}

// levelPicture draws the levels, highest first, one line a level.
func levelPicture(level map[string]int) string {
	rows := map[int][]string{}
	top := 0
	for _, pkg := range byLevel(level) {
		rows[level[pkg]] = append(rows[level[pkg]], pkg)
		top = max(top, level[pkg])
	}
	var b strings.Builder
	b.WriteString("```\n")
	for lv := top; lv >= 0; lv-- {
		line := fmt.Sprintf("%-2d", lv)
		for _, pkg := range rows[lv] {
			if len(line)+3+len(pkg) > 100 {
				b.WriteString(line + "\n")
				line = "  "
			}
			line += "   " + pkg
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// importTable lists each package's imports and level.
func importTable(code map[string][]string, level map[string]int) string {
	var b strings.Builder
	b.WriteString("| package | level | imports |\n| --- | --- | --- |\n")
	for _, pkg := range byLevel(level) {
		imps := "none"
		if len(code[pkg]) > 0 {
			imps = "`" + strings.Join(code[pkg], "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %d | %s |\n", pkg, level[pkg], imps)
	}
	return b.String()
}

// generated replaces, in md, the text between "<!-- generated: name -->"
// and the next "<!-- end -->" with text, and reports what stood there.
func generated(t *testing.T, md, name, text string) (doc, was string) {
	t.Helper()
	open, end := "<!-- generated: "+name+" -->\n", "<!-- end -->"
	before, rest, ok := strings.Cut(md, open)
	require.True(t, ok, "docs/ARCHITECTURE.md has no %q", open)
	was, after, ok := strings.Cut(rest, end)
	require.True(t, ok, "docs/ARCHITECTURE.md has no %q after %q", end, open)
	return before + open + text + end + after, was
}

// The level picture and the import table of ARCHITECTURE.md are drawn from
// go list: a change of imports fails this test until
// `go test ./docs -run TestArchitecture -update` redraws them.
func TestArchitectureSaysWhatTheImportsSay(t *testing.T) {
	code := codeImports(t)
	level := levels(code)
	path := filepath.Join(repoRoot(t), "docs", "ARCHITECTURE.md")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	md, was := generated(t, string(raw), "levels", levelPicture(level))
	assert.Equal(t, levelPicture(level), was, "the level picture; run go test ./docs -run TestArchitecture -update")
	md, was = generated(t, md, "imports", importTable(code, level))
	assert.Equal(t, importTable(code, level), was, "the import table; run go test ./docs -run TestArchitecture -update")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(md), 0o644))
	}
}

// Folders show the layers: a package in the folder of another package
// (track/watch in track) imports nothing above that package, so no import
// runs back up through a folder; an internal/ folder is the floor of the
// folder that holds it, so a package in one (internal/format,
// track/internal/grouping) imports only packages in internal/ folders; and
// the examples import only what a user can import.
func TestFoldersShowTheLayers(t *testing.T) {
	code := codeImports(t)
	level := levels(code)
	for pkg, imps := range code {
		if inInternal(pkg) {
			for _, imp := range imps {
				assert.True(t, inInternal(imp),
					"%s, in an internal/ folder (a floor below the packages beside that folder), imports %s (level %d), which is above it",
					pkg, imp, level[imp])
			}
		}
		for parent := filepath.Dir(pkg); parent != "."; parent = filepath.Dir(parent) {
			if _, ok := code[parent]; !ok {
				continue
			}
			for _, imp := range imps {
				if imp == parent || strings.HasPrefix(imp, parent+"/") {
					continue
				}
				assert.LessOrEqual(t, level[imp], level[parent],
					"%s, in the folder of %s (level %d), imports %s (level %d), which is above it",
					pkg, parent, level[parent], imp, level[imp])
			}
		}
		if strings.HasPrefix(pkg, "examples/") {
			for _, imp := range imps {
				assert.False(t, inInternal(imp), "%s imports %s: an example imports only public packages", pkg, imp)
			}
		}
	}
}

// inInternal reports whether pkg sits in an internal/ folder.
func inInternal(pkg string) bool {
	return strings.Contains("/"+pkg+"/", "/internal/")
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
