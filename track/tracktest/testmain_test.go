package tracktest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// fakeM stands for *testing.M.
type fakeM struct {
	run  func() int
	runs int
}

func (m *fakeM) Run() int {
	m.runs++
	return m.run()
}

// exited is what VerifyTestMain passed to the swapped exit.
type exited struct{ code int }

// verifyTestMain runs VerifyTestMain with a swapped exit and stderr and
// returns the exit status. The swap is process-wide: callers are not
// parallel.
func verifyTestMain(t *testing.T, tr *track.Tracker, run func() int, opts ...tracktest.Option) int {
	code, _, _ := verifyTestMainOutput(t, tr, run, opts...)
	return code
}

func verifyTestMainOutput(t *testing.T, tr *track.Tracker, run func() int, opts ...tracktest.Option) (code int, stderr string, runs int) {
	t.Helper()
	var out syncBuffer
	m := &fakeM{run: run}
	restore := tracktest.SwapProcess(func(c int) { panic(exited{c}) }, &out)
	defer restore()
	func() {
		defer func() {
			r := recover()
			e, ok := r.(exited)
			require.True(t, ok, "VerifyTestMain must end by exiting, got %v", r)
			code = e.code
		}()
		tracktest.VerifyTestMain(m, tr, opts...)
	}()
	return code, out.String(), m.runs
}

func TestVerifyTestMain(t *testing.T) {
	tests := []struct {
		name     string
		testCode int
		leak     bool // a tensor left live
		drop     bool // a tensor dropped and reclaimed while the tests run
		opts     []tracktest.Option
		wantCode int
		wantRuns int
		stderr   string // "" means nothing printed
	}{
		{"clean run", 0, false, false, fast, 0, 1, ""},
		{"leak after passing tests", 0, true, false, fast, 1, 1, `tracktest: 1 tensor leaked (40 B) in tracker "main":`},
		{"tensor dropped during the tests", 0, false, true, fast, 1, 1, `tracktest: 1 tensor leaked (64 B) in tracker "main" (1 handle: 0 live, 1 dropped without Free):`},
		{"failing tests are not checked", 3, true, true, fast, 3, 1, ""},
		{"invalid option stops before running", 0, false, false, []tracktest.Option{tracktest.IgnoreKind("")}, 1, 0, `tracktest: invalid option: IgnoreKind(""): want a kind`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "main")
			var leaked []any
			code, stderr, runs := verifyTestMainOutput(t, e.tr, func() int {
				if tt.leak {
					leaked = append(leaked, e.newTensor(t, context.Background(), 10))
				}
				if tt.drop {
					dropTensor(t, e, context.Background())
					collectDropped(t, e.tr, 1, int64(len(leaked)))
				}
				return tt.testCode
			}, tt.opts...)
			assert.Equal(t, tt.wantCode, code)
			assert.Equal(t, tt.wantRuns, runs)
			if tt.stderr == "" {
				assert.Empty(t, stderr)
			} else {
				assert.Contains(t, stderr, tt.stderr)
			}
			_ = leaked
		})
	}
}
