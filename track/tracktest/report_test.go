package tracktest_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
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

// goldenHeld makes a tensor, keeps a View and a named owner's handle of it,
// and frees its own handle: two kinds of holder keep it.
//
//go:noinline
func goldenHeld(t *testing.T, alloc tensor.Allocator) []*tensor.Tensor {
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 8)
	require.NoError(t, err)
	v, err := x.View(0, 4)
	require.NoError(t, err)
	c, err := x.RetainFor("session cache entry")
	require.NoError(t, err)
	require.NoError(t, x.Free())
	return []*tensor.Tensor{v, c}
}

// normalize removes what differs between machines and runs: ages, the
// directory of this package, and the line numbers of frames outside it
// (the Go release's testing and runtime packages).
func normalize(t *testing.T, report string) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	report = withoutRetainers(regexp.MustCompile(`\bage [^,\n]+`).ReplaceAllString(report, "age _"))
	return regexp.MustCompile(`(?m)^(\s+)\t(.+):(\d+)$`).ReplaceAllStringFunc(report, func(line string) string {
		m := regexp.MustCompile(`^(\s+)\t(.+):(\d+)$`).FindStringSubmatch(line)
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
	held := goldenHeld(t, e.alloc)
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
	for _, h := range held {
		require.NoError(t, h.Free())
	}
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

//go:noinline
func viewed(t *testing.T, e *env) (*tensor.Tensor, []*tensor.Tensor) {
	x, err := tensor.New(context.Background(), e.alloc, tensor.Float32, 256) // 1 KiB
	require.NoError(t, err)
	var vs []*tensor.Tensor
	for range 3 {
		v, err := x.View(0, 16)
		require.NoError(t, err)
		vs = append(vs, v)
	}
	return x, vs
}

// A tensor held by several handles counts once in the header and in its
// site's line, by its memory; its handles are counted apart.
func TestReportCountsTensorsAndBytesOnceAndHandlesApart(t *testing.T) {
	e := newEnv(t, "counts")
	x, views := viewed(t, e)
	require.NoError(t, x.Free()) // three Views hold its 1 KiB
	var plain []*tensor.Tensor
	for range 2 {
		plain = append(plain, e.newTensor(t, context.Background(), 64))
	}

	err := tracktest.Find(e.tr, tracktest.MaxSettle(0))
	var le *tracktest.LeakError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 3, le.Tensors)
	assert.Equal(t, 5, le.Handles, "three Views and two own handles")
	assert.EqualValues(t, 1024+2*256, le.Bytes)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, `tracktest: 3 tensors leaked (1.5 KiB) in tracker "counts" (5 handles: 5 live, 0 dropped without Free):`), msg)
	assert.Contains(t, msg, ".viewed (report_test.go:")
	assert.Regexp(t, `\.viewed \(report_test\.go:\d+\): 1 tensor, 1 KiB, 3 handles\n`, msg)
	assert.Regexp(t, `\.newTensor \(helpers_test\.go:\d+\): 2 tensors, 512 B\n`, msg)
	assert.Contains(t, msg, "held by a View made at report_test.go:")
	assert.Regexp(t, `held by a View made at report_test\.go:\d+ \(\S+\.viewed\), 3 handles\n`, msg)

	for _, v := range append(views, plain...) {
		require.NoError(t, v.Free())
	}
}
