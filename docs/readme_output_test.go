package docs_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outputBlock is a fenced block of the README that shows what a command
// prints, marked by the comment right above it: <!-- output: CMD -->.
type outputBlock struct {
	line    int // of the opening fence
	command string
	lines   []string
}

var outputComment = regexp.MustCompile(`^<!-- output: (.*) -->$`)

// outputBlocks returns the README's marked output blocks. A comment that
// is not followed by a fence is an error, so a marker cannot go stale.
func outputBlocks(t *testing.T) []outputBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	var out []outputBlock
	for i, l := range lines {
		m := outputComment.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		require.Less(t, i+1, len(lines), "README.md:%d: an output comment ends the file", i+1)
		require.True(t, strings.HasPrefix(lines[i+1], "```"), "README.md:%d: an output comment not followed by a fenced block", i+1)
		b := outputBlock{line: i + 2, command: m[1]}
		for j := i + 2; j < len(lines) && lines[j] != "```"; j++ {
			b.lines = append(b.lines, lines[j])
		}
		out = append(out, b)
	}
	return out
}

// masks are the parts of an output that vary by run: they are replaced,
// in the README's block and in the real output alike, before the two are
// compared. Everything else must be as printed.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`), "<date>"},
	{regexp.MustCompile(`\d{8}T\d{6}\.\d{3}Z`), "<date>"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\b`), "<clock>"},
	{regexp.MustCompile(`0x[0-9a-f]+`), "0x<addr>"},
	{regexp.MustCompile(`\bgoroutine \d+`), "goroutine <n>"},
	{regexp.MustCompile(`\bgo1\.\d+(\.\d+)?`), "go<version>"},
	// A rate, then a duration (with its ~ or <), simple or compound.
	{regexp.MustCompile(`\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)/s\b`), "<rate>"},
	{regexp.MustCompile(`(^|[^\w.])[~<]?\d+(\.\d+)?(ns|µs|us|ms|s|m|h)( ?\d+(\.\d+)?(ns|µs|us|ms|s|m))*\b`), "${1}<duration>"},
}

// mask replaces what varies by run in text: the checkout's path (shown as
// /src/tensorlife), the temporary directory (shown as /tmp), and the
// masks.
func mask(text, root, tmp string) string {
	if tmp != "" { // first: it is a directory of its own, never above root
		text = strings.ReplaceAll(text, tmp, "/tmp")
	}
	text = strings.ReplaceAll(text, root, "/src/tensorlife")
	for _, m := range masks {
		text = m.re.ReplaceAllString(text, m.with)
	}
	return text
}

// matchBlock reports whether the block is what the output printed: line
// for line (trailing spaces aside), where a line of "..." in the block
// stands for any lines left out, and the block's first and last lines are
// the output's unless a "..." stands there.
func matchBlock(block, output []string) bool {
	trim := func(ls []string) []string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = strings.TrimRight(l, " \t")
		}
		for len(out) > 0 && out[len(out)-1] == "" {
			out = out[:len(out)-1]
		}
		return out
	}
	block, output = trim(block), trim(output)
	var parts [][]string
	var cur []string
	openStart, openEnd := false, false
	for i, l := range block {
		if strings.TrimSpace(l) == "..." {
			if i == 0 {
				openStart = true
			}
			if i == len(block)-1 {
				openEnd = true
			}
			if len(cur) > 0 {
				parts = append(parts, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		parts = append(parts, cur)
	}
	at := 0
	for i, part := range parts {
		found := -1
		for j := at; j+len(part) <= len(output); j++ {
			if i == 0 && !openStart && j > 0 {
				break
			}
			if equalLines(part, output[j:j+len(part)]) {
				found = j
				break
			}
		}
		if found < 0 {
			return false
		}
		at = found + len(part)
	}
	return openEnd || at == len(output)
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// commandRuns runs each command once, however many blocks show it.
type commandRuns struct {
	mu   sync.Mutex
	runs map[string]*commandRun
}

type commandRun struct {
	once   sync.Once
	output string
	tmp    string
	err    error
}

// run runs command as a new shell in the repository root would, with a
// temporary directory of its own as TMPDIR, and returns what it printed,
// stdout and stderr as a terminal shows them, and that TMPDIR. Its exit
// status is not judged here: the README's shell blocks say it. What the
// command writes in the root, it writes as the README's reader would
// (agentleak's tensors.pb.gz, which git ignores).
func (c *commandRuns) run(t *testing.T, root, command string) (string, string) {
	c.mu.Lock()
	r := c.runs[command]
	if r == nil {
		r = &commandRun{}
		c.runs[command] = r
	}
	c.mu.Unlock()
	r.once.Do(func() {
		r.tmp, r.err = os.MkdirTemp("", "readme")
		if r.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", command)
		cmd.Dir = root
		cmd.Env = append(withoutEnv(os.Environ(), "TMPDIR", "TENSORLIFE_RETAINERS", "TENSORLIFE_STACK"), "TMPDIR="+r.tmp)
		out, err := cmd.CombinedOutput()
		r.output = string(out)
		if _, exited := err.(*exec.ExitError); err != nil && !exited {
			r.err = err
		}
	})
	require.NoError(t, r.err, "%s", command)
	return r.output, r.tmp
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// readSources opens every Go file of the module, so that go test's cache,
// which knows the files a test opens but not those its commands read, runs
// this test again when the code behind an output changes.
func readSources(t *testing.T, root string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".cache") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			_, err := os.ReadFile(path)
			return err
		}
		return nil
	}))
}

// Every block of the README that shows what a command prints is what it
// prints. It takes longer than 4 s: it builds and runs the README's six
// commands (about 4 s of CPU with the build cache warm, more where a
// command's build is not cached), and an output is the README's only if
// the command runs: each marked block (<!-- output: CMD -->) is compared with a real
// run of CMD in the repository root, with only what varies by run masked
// (times, rates, dates, addresses, goroutine numbers, the checkout's and
// the temporary directory's paths). A changed line of output, or of the
// block, fails here.
func TestReadmeOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's commands")
	}
	root := repoRoot(t)
	readSources(t, root)
	blocks := outputBlocks(t)
	require.NotEmpty(t, blocks)
	runs := &commandRuns{runs: map[string]*commandRun{}}
	// The commands are separate processes that share nothing but the build
	// cache, which is safe for concurrent use, and the files agentleak
	// writes whole (internal/atomicfile): they run side by side.
	t.Run("blocks", func(t *testing.T) {
		for _, b := range blocks {
			t.Run(fmt.Sprintf("README.md:%d", b.line), func(t *testing.T) {
				t.Parallel()
				out, tmp := runs.run(t, root, b.command)
				got := strings.Split(mask(out, root, tmp), "\n")
				want := strings.Split(mask(strings.Join(b.lines, "\n"), root, ""), "\n")
				assert.True(t, matchBlock(want, got),
					"README.md:%d is not what `%s` prints; the block, masked:\n%s\n\nthe output, masked:\n%s",
					b.line, b.command, strings.Join(want, "\n"), strings.Join(got, "\n"))
			})
		}
	})
	t.Cleanup(func() {
		for _, r := range runs.runs {
			if r.tmp != "" {
				os.RemoveAll(r.tmp)
			}
		}
	})
}

// The matcher itself: "..." lines stand for what is left out, and nothing
// else is.
func TestMatchBlock(t *testing.T) {
	out := []string{"a", "b", "c", "d", ""}
	tests := []struct {
		block []string
		want  bool
	}{
		{[]string{"a", "b", "c", "d"}, true},
		{[]string{"a", "b", "c"}, false},
		{[]string{"b", "c", "d"}, false},
		{[]string{"...", "b", "c", "..."}, true},
		{[]string{"a", "...", "d"}, true},
		{[]string{"a", "  ...", "c", "..."}, true},
		{[]string{"...", "c", "b", "..."}, false},
		{[]string{"a", "b", "x", "d"}, false},
		{[]string{"a  ", "b", "c", "d"}, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, matchBlock(tt.block, out), "%q", tt.block)
	}
	assert.Equal(t, "runs out in <duration> at <rate>: <duration> since <clock>, taken <date> UTC, up <duration> (<duration>) 64 B",
		mask("runs out in ~491ms at 32.2 MiB/s: 57m 59s since 17:37:11, taken 2026-12-01 17:37:11 UTC, up 12ms (0.66s) 64 B", "/r", ""))
	assert.Equal(t, "/src/tensorlife/examples/agentleak/agent.go:76 /tmp/x asm_amd64.s:1771 float32[16]",
		mask("/r/examples/agentleak/agent.go:76 /t/x asm_amd64.s:1771 float32[16]", "/r", "/t"))
}
