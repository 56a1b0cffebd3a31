package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The sample marks each line the check must report with "// flagged".
func TestCheckDirReportsTheMarkedLines(t *testing.T) {
	dir := filepath.Join("testdata", "p")
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
