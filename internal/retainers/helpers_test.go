package retainers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

var (
	symbolsBin  string
	symbolsErr  error
	symbolsOnce sync.Once
)

// goCommand returns the go command that built this test, for building a
// copy of it with symbols.
func goCommand(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	t.Skip("no go command to build a test binary with symbols")
	return ""
}

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
	goCmd := goCommand(t)
	symbolsOnce.Do(func() {
		symbolsDir, symbolsErr = os.MkdirTemp("", "tensorlife-retainers-test-")
		if symbolsErr != nil {
			return
		}
		symbolsBin = filepath.Join(symbolsDir, "retainers.test")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goCmd, "test", "-c", "-o", symbolsBin, "-ldflags=-s=false -w=false", ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			symbolsErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	require.NoError(t, symbolsErr, "building the test binary with symbols")
	out, err := runChild(t, symbolsBin, t.Name())
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
