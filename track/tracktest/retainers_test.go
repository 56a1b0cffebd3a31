package tracktest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// The rerun flag a report without symbols must print, spelled out here as a
// user would copy it.
const rerunHint = "go test -ldflags='-s=false -w=false'"

// leakyPkg is the import path of the tests that leak on purpose.
const leakyPkg = "github.com/tensorlife/tensorlife/track/tracktest/testdata/leaky"

// buildLeaky builds the test binary of testdata/leaky with the given linker
// flags.
func buildLeaky(t *testing.T, ldflags string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the leaking tests")
	}
	bin := filepath.Join(t.TempDir(), "leaky.test")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goCmd, "test", "-c", "-o", bin, "-ldflags="+ldflags, "./testdata/leaky").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// runLeaky runs the tests of a leaky binary that match pattern, with
// TENSORLIFE_RETAINERS set as env says, and returns each test's output by
// name. Every one of them fails: they leak on purpose.
func runLeaky(t *testing.T, bin, pattern string, env ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run="+pattern, "-test.v", "-test.count=1")
	cmd.Env = append(withoutRetainersEnv(os.Environ()), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the leaking tests must fail, not %v:\n%s", err, out)
	assert.NotContains(t, string(out), "bad status", "no dump crashed")
	tests := make(map[string]string)
	for _, part := range strings.Split(string(out), "=== RUN   ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		tests[name] = body
	}
	return tests
}

func withoutRetainersEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TENSORLIFE_RETAINERS=") {
			out = append(out, kv)
		}
	}
	return out
}

// keptBy returns the "kept alive by" lines of a report.
func keptBy(report string) []string {
	var out []string
	for _, line := range strings.Split(report, "\n") {
		if _, k, ok := strings.Cut(line, "kept alive by: "); ok {
			out = append(out, k)
		}
	}
	return out
}

// With TENSORLIFE_RETAINERS=1 and a binary with symbols, each failing check
// names the variable, field, index, map key, captured variable or
// goroutine frame and local that keeps its leak alive.
func TestRetainersNameWhatKeepsEachLeak(t *testing.T) {
	bin := buildLeaky(t, "-s=false -w=false")
	tests := runLeaky(t, bin, "^TestLeakIn", "TENSORLIFE_RETAINERS=1")
	want := map[string]string{
		"TestLeakInPackageMap": regexp.QuoteMeta(`package var ` + leakyPkg + `.maskCache["prompt-17"]   (map[string]*tensor.Tensor)`),
		"TestLeakInSliceField": regexp.QuoteMeta(`package var ` + leakyPkg + `.server.sessions[1].masks[2]   (*leaky.registry)`),
		"TestLeakInClosure": regexp.QuoteMeta(`package var ` + leakyPkg + `.hooks[0] → closure ` + leakyPkg +
			`.onDone.func1, captured m   ([]func() int64)`),
		"TestLeakInBlockedGoroutine": `goroutine \d+ \[chan receive\], created by ` + regexp.QuoteMeta(leakyPkg) +
			`\.TestLeakInBlockedGoroutine at leaky_test.go:\d+: frame ` + regexp.QuoteMeta(leakyPkg) +
			`\.worker \(leaky_test.go:\d+\), local scratch   \(\*tensor\.Tensor\)`,
	}
	for name, pattern := range want {
		report, ok := tests[name]
		require.True(t, ok, "%s did not run", name)
		lines := keptBy(report)
		require.Len(t, lines, 1, "%s:\n%s", name, report)
		assert.Regexp(t, "^"+pattern+"$", lines[0], name)
		assert.Contains(t, report, "Retainers: searched for 1 handle in a heap dump.", name)
		assert.NotContains(t, report, rerunHint, "%s: everything is named", name)
	}
	// The line sits under the leaked tensor's entry.
	assert.Regexp(t, `tensor \d+: bool\[1 77\], 77 B, kind mask, device host, age [^\n]+\n\s+kept alive by: package var `,
		tests["TestLeakInPackageMap"])
}

// Without symbols (as `go test` links), the report names what it can and
// says how to rerun.
func TestRetainersWithoutSymbolsSayHowToRerun(t *testing.T) {
	bin := buildLeaky(t, "-s -w")
	tests := runLeaky(t, bin, "^TestLeakIn", "TENSORLIFE_RETAINERS=1")
	for _, name := range []string{"TestLeakInPackageMap", "TestLeakInSliceField", "TestLeakInClosure", "TestLeakInBlockedGoroutine"} {
		report := tests[name]
		assert.Contains(t, report, "rerun with "+rerunHint, name)
		assert.Len(t, keptBy(report), 1, "%s:\n%s", name, report)
	}
	assert.Regexp(t, `kept alive by: a package variable \((data|bss) segment \+0x[0-9a-f]+\) → `, tests["TestLeakInPackageMap"])
	assert.Contains(t, tests["TestLeakInClosure"], "→ closure "+leakyPkg+".onDone.func1 (", "a closure's function is named")
	assert.Regexp(t, `kept alive by: goroutine \d+ \[chan receive\], created by `+regexp.QuoteMeta(leakyPkg)+
		`\.TestLeakInBlockedGoroutine at leaky_test.go:\d+: frame `+regexp.QuoteMeta(leakyPkg)+
		`\.worker \(leaky_test.go:\d+\), stack slot sp\+0x[0-9a-f]+\n`, tests["TestLeakInBlockedGoroutine"])
}

// The search says why it found nothing: a tensor made before it was turned
// on, and goroutines in system calls, beside which it does not dump.
func TestRetainersSayWhyTheyDidNotSearch(t *testing.T) {
	bin := buildLeaky(t, "-s=false -w=false")
	tests := runLeaky(t, bin, "^(TestLeakMadeBeforeRetainers|TestLeakBesideBusySyscalls)$")
	before := tests["TestLeakMadeBeforeRetainers"]
	assert.Contains(t, before, "Retainers: 1 live tensor made before the search was turned on")
	assert.Contains(t, before, "set TENSORLIFE_RETAINERS=1")
	assert.Empty(t, keptBy(before))

	busy := tests["TestLeakBesideBusySyscalls"]
	assert.Regexp(t, `Retainers: not searched: heap dump not written: \d goroutines were in system calls`, busy)
	assert.Contains(t, busy, leakyPkg+".TestLeakBesideBusySyscalls.func", "the busy goroutines are named")
	assert.Contains(t, busy, "--- FAIL: TestLeakBesideBusySyscalls", "the check still fails, and the process lives on")
	assert.Empty(t, keptBy(busy))
}

// kept holds a tensor the way a careless cache would.
var kept []*tensor.Tensor

// In this test binary, linked as `go test` links it unless told otherwise,
// the option finds the path and names as much as the binary allows.
func TestRetainersOption(t *testing.T) {
	retainers := tracktest.Retainers()
	e := newEnv(t, "retainers")
	kept = append(kept, e.newTensor(t, context.Background(), 4))
	defer func() {
		for _, x := range kept {
			_ = x.Free()
		}
		kept = nil
	}()
	err := tracktest.Find(e.tr, tracktest.MaxRetries(0), retainers)
	var le *tracktest.LeakError
	require.ErrorAs(t, err, &le)
	require.Len(t, le.Leaks, 1)
	require.Len(t, le.Leaks[0].KeptBy, 1, "%v", err)
	assert.Regexp(t, `^(package var github.com/tensorlife/tensorlife/track/tracktest_test\.kept\[0\]   \(\[\]\*tensor\.Tensor\)`+
		`|a package variable \((data|bss) segment \+0x[0-9a-f]+\) → object \(8 B \+0\))$`, le.Leaks[0].KeptBy[0])
	assert.Contains(t, le.Retainers, "searched for 1 handle")
	assert.Contains(t, err.Error(), "      kept alive by: "+le.Leaks[0].KeptBy[0]+"\n")

	// Without the option, nothing is searched.
	err = tracktest.Find(e.tr, tracktest.MaxRetries(0))
	require.ErrorAs(t, err, &le)
	if os.Getenv("TENSORLIFE_RETAINERS") != "1" {
		assert.Empty(t, le.Leaks[0].KeptBy)
		assert.Empty(t, le.Retainers)
		assert.NotContains(t, err.Error(), "Retainers:")
	}
}
