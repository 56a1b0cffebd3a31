package tracktest_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// The scenario's allocating functions live in this file, so the golden
// report's line numbers move only when this file changes; rewrite it with
// go test -run TestReportGolden -update.

//go:noinline
func goldenMasks(t *testing.T, alloc tensor.Allocator, ctx context.Context) []*tensor.Tensor {
	var ms []*tensor.Tensor
	for range 2 {
		m, err := tensor.Make(ctx, alloc, tensor.Spec{DType: tensor.Bool, Shape: tensor.Shape{64, 64}, Kind: "mask"})
		require.NoError(t, err)
		ms = append(ms, m)
	}
	return ms
}

//go:noinline
func goldenKV(t *testing.T, alloc tensor.Allocator) *tensor.Tensor {
	kv, err := tensor.Make(context.Background(), alloc, tensor.Spec{DType: tensor.BFloat16, Shape: tensor.Shape{2, 512, 512}, Kind: "kv-cache"})
	require.NoError(t, err)
	return kv
}

//go:noinline
func goldenDrop(t *testing.T, alloc tensor.Allocator) {
	x, err := tensor.New(context.Background(), alloc, tensor.Int64, 3)
	require.NoError(t, err)
	_ = x
}

// normalize removes what differs between machines and runs: ages, the
// directory of this package, and the line numbers of frames outside it
// (the Go release's testing and runtime packages).
func normalize(t *testing.T, report string) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	report = withoutRetainers(regexp.MustCompile(`\bage [^,\n]+`).ReplaceAllString(report, "age _"))
	return regexp.MustCompile(`(?m)^(\s+)\t(\S+):(\d+)$`).ReplaceAllStringFunc(report, func(line string) string {
		m := regexp.MustCompile(`^(\s+)\t(\S+):(\d+)$`).FindStringSubmatch(line)
		if filepath.Dir(m[2]) == dir {
			return m[1] + "\t$PKG/" + filepath.Base(m[2]) + ":" + m[3]
		}
		return m[1] + "\t$OTHER/" + filepath.Base(m[2]) + ":_"
	})
}

func TestReportGolden(t *testing.T) {
	noAutoGC(t)
	e := newEnv(t, "golden", track.ReclaimLeaks(false))
	ctx := track.WithLabels(context.Background(), "request", "r1", "model", "m")
	masks := goldenMasks(t, e.alloc, ctx)
	kv := goldenKV(t, e.alloc)
	goldenDrop(t, e.alloc)
	runtime.GC()
	// The collector's cleanup flags the dropped tensor on its own goroutine;
	// once it has, one look is exact.
	require.Eventually(t, func() bool { return e.tr.Totals().GCLeaks == 1 }, 5*time.Second, time.Millisecond)

	err := tracktest.Find(e.tr, tracktest.MaxRetries(0))
	require.Error(t, err)
	got := normalize(t, err.Error()) + "\n"

	path := filepath.Join("testdata", "report.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), got)

	for _, m := range masks {
		require.NoError(t, m.Free())
	}
	require.NoError(t, kv.Free())
}

func TestFormatting(t *testing.T) {
	tests := []struct {
		bytes int64
		dims  []int
		want  string
	}{
		{0, []int{0}, "0 B"},
		{1023, []int{1023}, "1023 B"},
		{1024, []int{1024}, "1 KiB"},
		{1536, []int{1536}, "1.5 KiB"},
		{3 << 20, []int{3 << 20}, "3 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			e := newEnv(t, "format")
			x, err := tensor.New(context.Background(), e.alloc, tensor.Uint8, tt.dims...)
			require.NoError(t, err)
			err = tracktest.Find(e.tr, tracktest.MaxRetries(0))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "leaked ("+tt.want+")")
			require.NoError(t, x.Free())
		})
	}
}
