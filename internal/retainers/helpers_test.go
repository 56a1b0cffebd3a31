package retainers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// childEnv marks a process this package's tests started to run one test in.
const childEnv = "TENSORLIFE_RETAINERS_TEST_CHILD"

var symbolsDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if symbolsDir != "" {
		_ = os.RemoveAll(symbolsDir)
	}
	os.Exit(code)
}

var (
	selfNamed     bool
	selfNamedOnce sync.Once
)

// namedHere reports whether this test binary has the symbol table and the
// DWARF that name paths.
func namedHere() bool {
	selfNamedOnce.Do(func() {
		b := openBinary()
		defer b.close()
		selfNamed = b.complete()
	})
	return selfNamed
}

// goCommand returns the go command, for building copies of this test
// binary with other flags.
func goCommand(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	t.Skip("no go command to build a test binary with other flags")
	return ""
}

// testBinaries are copies of this package's test binary built with other
// flags, by their flags, built once per process.
var testBinaries struct {
	mu   sync.Mutex
	bins map[string]string
}

// buildTestBinary builds this package's test binary with flags (go test
// flags), once per process.
func buildTestBinary(t *testing.T, flags ...string) string {
	t.Helper()
	goCmd := goCommand(t)
	key := strings.Join(flags, " ")
	testBinaries.mu.Lock()
	defer testBinaries.mu.Unlock()
	if bin, ok := testBinaries.bins[key]; ok {
		return bin
	}
	if symbolsDir == "" {
		dir, err := os.MkdirTemp("", "tensorlife-retainers-test-")
		require.NoError(t, err)
		symbolsDir = dir
	}
	bin := filepath.Join(symbolsDir, fmt.Sprintf("retainers-%d.test", len(testBinaries.bins)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(append([]string{"test", "-c", "-o", bin}, flags...), ".")
	out, err := exec.CommandContext(ctx, goCmd, args...).CombinedOutput()
	require.NoError(t, err, "building the test binary with %s:\n%s", key, out)
	if testBinaries.bins == nil {
		testBinaries.bins = make(map[string]string)
	}
	testBinaries.bins[key] = bin
	return bin
}

// withSymbols are the flags of a test binary that names everything.
const withSymbols = "-ldflags=-s=false -w=false"

// rerunWithSymbols runs the calling test in a copy of this package's test
// binary linked with the symbol table and the DWARF, unless this binary
// has them: it returns true when the test ran (and passed or failed)
// there, false when the test should go on here.
func rerunWithSymbols(t *testing.T) bool {
	t.Helper()
	if namedHere() {
		return false
	}
	require.Empty(t, os.Getenv(childEnv), "a child built with symbols has none")
	bin := buildTestBinary(t, withSymbols)
	out, err := runChild(t, bin, t.Name())
	require.NoError(t, err, "%s in a test binary with symbols:\n%s", t.Name(), out)
	t.Logf("ran in a test binary linked with symbols:\n%s", out)
	return true
}

// runChild runs one test of a test binary in a child process, so that a
// crash fails that test instead of ending this process.
func runChild(t *testing.T, bin, test string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
