package pprofexport_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
)

// runPprof runs go tool pprof with args and returns its standard output.
// pprof writes what it fetches over HTTP under $PPROF_TMPDIR; it is pointed
// at the test's temporary directory. A profile that pprof tried to
// symbolize again fails the test: the files must stand on their own.
func runPprof(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := pprofPath()
	if err != nil {
		t.Skipf("go tool pprof is not available: %v", err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+tmp, "HOME="+tmp, "PPROF_BINARY_PATH="+tmp)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("pprof %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	assert.NotContains(t, strings.ToLower(stderr.String()), "symboliz")
	return string(out), nil
}

// lineMatching returns the first line of out matching re, or "".
func lineMatching(out string, re *regexp.Regexp) string {
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			return l
		}
	}
	return ""
}

// topRow matches a -top row: flat value, then the function.
func topRow(flat, fn string) *regexp.Regexp {
	return regexp.MustCompile(`^\s*` + regexp.QuoteMeta(flat) + `\s.*\s` + regexp.QuoteMeta(fn) + `$`)
}

func TestGoToolPprof(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	prog.churn("r3", 2)
	dir := t.TempDir()
	oldPath := filepath.Join(dir, "old.pb.gz")
	require.NoError(t, pprofexport.WriteFile(oldPath, prog.snapshot()))
	prog.masks("r4", 4)
	path := filepath.Join(dir, "tensors.pb.gz")
	require.NoError(t, pprofexport.WriteFile(path, prog.snapshot()))
	maskLine := markerLine(t, "line:mask")

	tests := []struct {
		name    string
		args    []string
		want    []*regexp.Regexp
		notWant []string
	}{
		{
			name: "top inuse_space, the default",
			args: []string{"-top", path},
			want: []*regexp.Regexp{
				regexp.MustCompile(`^Type: inuse_space$`),
				topRow("28kB", fnMasks), // 7 masks of 4 KiB
				topRow("8kB", fnKV),     // 2 blocks of 4 KiB
			},
		},
		{
			name: "top alloc_objects",
			args: []string{"-top", "-sample_index=alloc_objects", path},
			want: []*regexp.Regexp{topRow("9", fnMasks), topRow("2", fnKV)},
		},
		{
			name: "list shows the allocating line",
			args: []string{"-list", "buildMasks", path},
			want: []*regexp.Regexp{
				regexp.MustCompile(`^ROUTINE =+ ` + regexp.QuoteMeta(fnMasks) + ` in .*program_test\.go$`),
				regexp.MustCompile(fmt.Sprintf(`^\s+28kB\s+28kB\s+%d:.*// line:mask$`, maskLine)),
			},
		},
		{
			name:    "tagfocus request selects one request's tensors",
			args:    []string{"-top", "-sample_index=inuse_objects", "-tagfocus", "request=r1", path},
			want:    []*regexp.Regexp{topRow("3", fnMasks)},
			notWant: []string{fnKV},
		},
		{
			name:    "tagfocus dtype=bool selects the masks",
			args:    []string{"-top", "-sample_index=inuse_objects", "-tagfocus", "dtype=bool", path},
			want:    []*regexp.Regexp{topRow("7", fnMasks)},
			notWant: []string{fnKV},
		},
		{
			name:    "tagfocus kind selects the KV cache",
			args:    []string{"-top", "-sample_index=inuse_objects", "-tagfocus", "kind=kv-cache", path},
			want:    []*regexp.Regexp{topRow("2", fnKV)},
			notWant: []string{fnMasks},
		},
		{
			name: "diff_base shows the growth",
			args: []string{"-top", "-sample_index=inuse_objects", "-diff_base", oldPath, path},
			want: []*regexp.Regexp{topRow("4", fnMasks)},
			// The KV blocks did not change, so they cancel out.
			notWant: []string{fnKV},
		},
		{
			name: "traces show stacks with labels",
			args: []string{"-traces", path},
			want: []*regexp.Regexp{
				regexp.MustCompile(`^\s+request:\s+r4$`),
				regexp.MustCompile(`^\s+dtype:\s+bool$`),
				regexp.MustCompile(`^\s+16kB\s+` + regexp.QuoteMeta(fnMasks) + `$`),
				regexp.MustCompile(`^\s+` + regexp.QuoteMeta("github.com/tensorlife/tensorlife/pprofexport_test.TestGoToolPprof") + `$`),
			},
			notWant: []string{"github.com/tensorlife/tensorlife/tensor.", "runtime.goexit"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runPprof(t, tt.args...)
			require.NoError(t, err)
			for _, re := range tt.want {
				assert.NotEmpty(t, lineMatching(out, re), "no line matches %s in:\n%s", re, out)
			}
			for _, s := range tt.notWant {
				assert.NotContains(t, out, s)
			}
		})
	}
}

func TestGoToolPprofEmptyProfile(t *testing.T) {
	prog := newProgram(t)
	path := filepath.Join(t.TempDir(), "empty.pb.gz")
	require.NoError(t, pprofexport.WriteFile(path, prog.snapshot()))
	out, err := runPprof(t, "-top", path)
	require.NoError(t, err)
	assert.Contains(t, out, "Type: inuse_space")
	assert.Contains(t, out, "of 0 total")
}

// pprofPath returns the path of the go tool pprof binary. `go tool -n
// pprof` prints it (building the tool into the cache if needed); it is
// asked once per test binary, so each run starts the binary directly
// instead of paying for `go tool` every time.
var pprofPath = sync.OnceValues(func() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(goBin, "tool", "-n", "pprof").Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n pprof: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
})
