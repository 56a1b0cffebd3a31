package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The sample marks each line the check must report with "// flagged". It is
// kept as a_test.go.txt, so that no reader of the repository's tests takes
// its waits for real ones, and copied into a package of its own to be read.
func TestCheckDirReportsTheMarkedLines(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "p", "a_test.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := checkDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range got {
		file, rest, _ := strings.Cut(f, ":")
		line, _, _ := strings.Cut(rest, ":")
		lines = append(lines, filepath.Base(file)+":"+line)
	}
	want := []string{"a_test.go:15", "a_test.go:34", "a_test.go:37", "a_test.go:43"}
	if !slices.Equal(lines, want) {
		t.Errorf("reported %v, want %v:\n%s", lines, want, strings.Join(got, "\n"))
	}
}
