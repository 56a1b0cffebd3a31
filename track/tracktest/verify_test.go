package tracktest_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

const thisPackage = "github.com/tensorlife/tensorlife/track/tracktest_test"

func TestVerifyNonePassesCleanTest(t *testing.T) {
	tests := []struct {
		name string
		work func(t *testing.T, e *env)
	}{
		{"nothing allocated", func(*testing.T, *env) {}},
		{"every tensor freed", func(t *testing.T, e *env) {
			for range 3 {
				require.NoError(t, e.newTensor(t, context.Background(), 8, 8).Free())
			}
		}},
		{"retained tensor freed by both owners", func(t *testing.T, e *env) {
			x := e.newTensor(t, context.Background(), 2)
			y, err := x.Retain()
			require.NoError(t, err)
			require.NoError(t, x.Free())
			require.NoError(t, y.Free())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "clean")
			tt.work(t, e)
			ft := newFakeT(t.Name())
			tracktest.VerifyNone(ft, e.tr, fast...)
			assert.Empty(t, ft.Errors())
			assert.Positive(t, ft.helpers, "Helper is called when the T has it")
		})
	}
}

// buildMasks allocates n masks at one line and returns that line.
func buildMasks(t *testing.T, e *env, ctx context.Context, n int) (masks []*tensor.Tensor, line int) {
	t.Helper()
	for range n {
		line = callerLine() + 1
		m, err := tensor.Make(ctx, e.alloc, tensor.Spec{DType: tensor.Bool, Shape: tensor.Shape{64, 64}, Kind: "mask"})
		require.NoError(t, err)
		masks = append(masks, m)
	}
	return masks, line
}

func TestVerifyNoneReportsLeakedTensors(t *testing.T) {
	e := newEnv(t, "leaky")
	ctx := track.WithLabels(context.Background(), "request", "r1")
	masks, line := buildMasks(t, e, ctx, 2)
	other := e.newTensor(t, context.Background(), 3, 5) // a second site

	ft := newFakeT(t.Name())
	tracktest.VerifyNone(ft, e.tr, fast...)

	errs := ft.Errors()
	require.Len(t, errs, 1, "one report, one Error call")
	report := errs[0]
	assert.True(t, strings.HasPrefix(report, `tracktest: 3 tensors leaked (8.1 KiB) in tracker "leaky":`+"\n"), report)
	assert.Contains(t, report, fmt.Sprintf("\nsite %s.buildMasks (verify_test.go:%d): 2 tensors, 8 KiB\n", thisPackage, line))
	assert.Regexp(t, `\n    tensor 1: bool\[64 64\], 4 KiB, kind mask, device host, age (<1ms|\d+ms), labels \{request=r1\}\n`, report)
	assert.Regexp(t, `\n    tensor 2: bool\[64 64\], 4 KiB, kind mask, device host, age [^,]+, labels \{request=r1\}\n`, report)
	assert.Regexp(t, `\n    tensor 3: float32\[3 5\], 60 B, kind tensor, device host, age [^,]+\n`, report)
	// The stack names the allocating line first, then its callers.
	stack := regexp.MustCompile(`(?s)site [^\n]*buildMasks[^\n]*\n.*?  stack:\n    ` + regexp.QuoteMeta(thisPackage+".buildMasks") +
		`\n    \t[^\n]*verify_test.go:` + fmt.Sprint(line) + `\n    ` + regexp.QuoteMeta(thisPackage+".TestVerifyNoneReportsLeakedTensors") + `\n`)
	assert.Regexp(t, stack, report)
	assert.Contains(t, report, "Free live tensors before the check")
	assert.NotContains(t, report, "dropped")

	for _, m := range masks {
		require.NoError(t, m.Free())
	}
	require.NoError(t, other.Free())
	ft = newFakeT(t.Name())
	tracktest.VerifyNone(ft, e.tr, fast...)
	assert.Empty(t, ft.Errors(), "clean once everything is freed")
}

func TestReportIsDeterministic(t *testing.T) {
	var reports []string
	for range 2 {
		e := newEnv(t, "same")
		var keep []*tensor.Tensor
		for _, dims := range [][]int{{4}, {2, 2}, {8}} {
			x, err := tensor.New(context.Background(), e.alloc, tensor.Float32, dims...)
			require.NoError(t, err)
			keep = append(keep, x)
		}
		masks, _ := buildMasks(t, e, context.Background(), 2)
		err := tracktest.Find(e.tr, fast...)
		require.Error(t, err)
		reports = append(reports, withoutRetainers(regexp.MustCompile(`\bage [^,\n]+`).ReplaceAllString(err.Error(), "age _")))
		runtime.KeepAlive(keep)
		runtime.KeepAlive(masks)
	}
	assert.Equal(t, reports[0], reports[1])
	// Sites are ordered by function name, then file and line.
	assert.Less(t, strings.Index(reports[0], ".TestReportIsDeterministic ("), strings.Index(reports[0], ".buildMasks ("))
	assert.Regexp(t, `tensor 1:[^\n]*\n    tensor 2:[^\n]*\n    tensor 3:`, reports[0], "tensors ordered by id within a site")
	assert.NotContains(t, reports[0], "dropped", "every handle was kept")
}

func TestFindReturnsLeakError(t *testing.T) {
	e := newEnv(t, "find")
	x, err := tensor.New(context.Background(), e.alloc, tensor.Float32, 16)
	require.NoError(t, err)
	err = tracktest.Find(e.tr, fast...)
	require.ErrorIs(t, err, tracktest.ErrLeaked)
	var le *tracktest.LeakError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "find", le.Tracker)
	assert.Empty(t, le.Scope)
	assert.Equal(t, int64(64), le.Bytes)
	require.Len(t, le.Leaks, 1)
	l := le.Leaks[0]
	assert.Equal(t, x.ID(), l.ID)
	assert.Equal(t, tracktest.Live, l.State)
	assert.Equal(t, "float32", l.DType)
	assert.Equal(t, []int{16}, l.Shape)
	assert.Equal(t, thisPackage+".TestFindReturnsLeakError", l.Site.Location().Function)
	assert.GreaterOrEqual(t, l.Age, time.Duration(0))
	assert.Equal(t, 1, le.Count(tracktest.Live))
	assert.Zero(t, le.Count(tracktest.Dropped))

	require.NoError(t, x.Free())
	assert.NoError(t, tracktest.Find(e.tr, fast...))
}

// In a synctest bubble the free comes 5 ms later on a fake clock, and the
// check's settling waits on that clock too.
func TestVerifyNoneWaitsForFreesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, "settle")
		x := e.newTensor(t, context.Background(), 4)
		done := make(chan error)
		go func() {
			<-time.After(5 * time.Millisecond)
			done <- x.Free()
		}()
		ft := newFakeT(t.Name())
		tracktest.VerifyNone(ft, e.tr) // default settle budget: a second
		assert.Empty(t, ft.Errors())
		require.NoError(t, <-done)
	})
}

func TestVerifyNoneSettlesCleanupsThatFree(t *testing.T) {
	noAutoGC(t)
	e := newEnv(t, "cleanup")
	// An owner object frees its tensor from a runtime cleanup: the check's
	// collection runs it, and the tensor leaves in time, freed.
	func() {
		owner := new([64]byte)
		x := e.newTensor(t, context.Background(), 4)
		runtime.AddCleanup(owner, func(x *tensor.Tensor) { _ = x.Free() }, x)
	}()
	ft := newFakeT(t.Name())
	tracktest.VerifyNone(ft, e.tr)
	assert.Empty(t, ft.Errors())
	assert.Zero(t, e.tr.Totals().GCLeaks)
}

func TestVerifyNoneReportsDroppedHandles(t *testing.T) {
	tests := []struct {
		name    string
		reclaim bool
		live    int64 // tensors left in the live set after the check
	}{
		{"tracker keeps leaked tensors", false, 1},
		{"tracker reclaims leaked tensors", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noAutoGC(t)
			e := newEnv(t, "dropped", track.ReclaimLeaks(tt.reclaim))
			dropTensor(t, e, context.Background())

			ft := newFakeT(t.Name())
			tracktest.VerifyNone(ft, e.tr, tracktest.MaxRetries(10))
			errs := ft.Errors()
			require.Len(t, errs, 1)
			assert.Contains(t, errs[0], `tracktest: 1 tensor leaked (64 B) in tracker "dropped" (1 handle: 0 live, 1 dropped without Free):`)
			assert.Regexp(t, `tensor 1: int32\[4 4\], 64 B, kind tensor, device host, age [^,]+, dropped without Free \(found by the garbage collector\)\n`, errs[0])
			assert.Contains(t, errs[0], "\nsite "+thisPackage+".dropTensor (helpers_test.go:")
			assert.Contains(t, errs[0], "free it on every path")
			tot := e.tr.Totals()
			assert.Equal(t, int64(1), tot.GCLeaks)
			assert.Equal(t, tt.live, tot.LiveCount)
		})
	}
}

func TestVerifyNoneTellsFreedFromDroppedAtOneSite(t *testing.T) {
	noAutoGC(t)
	e := newEnv(t, "one-site")
	// Two tensors from one line: one handle dropped, the other freed by an
	// owner's cleanup. Both leave the live set during the check's
	// collection; only the dropped one is a leak.
	var droppedID uint64
	func() {
		owner := new([64]byte)
		var xs []*tensor.Tensor
		for range 2 {
			x, err := tensor.New(context.Background(), e.alloc, tensor.Uint8, 8)
			require.NoError(t, err)
			xs = append(xs, x)
		}
		droppedID = xs[0].ID()
		runtime.AddCleanup(owner, func(x *tensor.Tensor) { _ = x.Free() }, xs[1])
	}()
	err := tracktest.Find(e.tr, tracktest.MaxRetries(10))
	var le *tracktest.LeakError
	require.ErrorAs(t, err, &le)
	require.Len(t, le.Leaks, 1)
	assert.Equal(t, droppedID, le.Leaks[0].ID)
	assert.Equal(t, tracktest.Dropped, le.Leaks[0].State)
	assert.Contains(t, err.Error(), `in tracker "one-site" (1 handle: 0 live, 1 dropped without Free):`)
}

func TestVerifyNoneWorksWithTheSmallestT(t *testing.T) {
	e := newEnv(t, "small")
	x := e.newTensor(t, context.Background(), 2)
	et := &errorOnlyT{}
	tracktest.VerifyNone(et, e.tr, fast...)
	require.Len(t, et.errors, 1)
	assert.Contains(t, et.errors[0], "1 tensor leaked")
	require.NoError(t, x.Free())
}

func TestVerifyNoneWithNilT(t *testing.T) {
	e := newEnv(t, "nil-t")
	x := e.newTensor(t, context.Background(), 2)
	var out strings.Builder
	defer tracktest.SwapProcess(func(int) { t.Error("VerifyNone must not exit") }, &out)()
	tracktest.VerifyNone(nil, e.tr, fast...)
	assert.Contains(t, out.String(), "tracktest: VerifyNone called with a nil TestingT")
	assert.Contains(t, out.String(), "1 tensor leaked")
	require.NoError(t, x.Free())
}

func TestNilTrackerMeansDefault(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, track.Default())
	require.NoError(t, err)
	before := tracktest.IgnoreCurrent() // whatever else the default tracker holds
	x, err := tensor.New(context.Background(), alloc, tensor.Int64, 3)
	require.NoError(t, err)

	err = tracktest.Find(nil, opts(before)...)
	var le *tracktest.LeakError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, track.Default().Name(), le.Tracker)
	require.NoError(t, x.Free())
	assert.NoError(t, tracktest.Find(nil, opts(before)...))
}

func TestFindRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  tracktest.Option
		msg  string
	}{
		{"nil option", nil, "nil option (passed to Find)"},
		{"empty site", tracktest.IgnoreSite(""), `IgnoreSite(""): want a function name`},
		{"empty kind", tracktest.IgnoreKind(""), `IgnoreKind(""): want a kind`},
		{"empty label key", tracktest.IgnoreLabel("", "v"), `IgnoreLabel("", "v"): want a key`},
		{"negative retries", tracktest.MaxRetries(-1), "MaxRetries(-1): want 0..1000"},
		{"too many retries", tracktest.MaxRetries(1001), "MaxRetries(1001): want 0..1000"},
		{"negative settle", tracktest.MaxSettle(-time.Second), "MaxSettle(-1s): want at least 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "options")
			err := tracktest.Find(e.tr, tt.opt)
			require.ErrorIs(t, err, tracktest.ErrInvalidOption)
			assert.False(t, errors.Is(err, tracktest.ErrLeaked))
			assert.Contains(t, err.Error(), tt.msg)

			ft := newFakeT(t.Name())
			tracktest.VerifyNone(ft, e.tr, tt.opt)
			require.Len(t, ft.Errors(), 1)
			assert.Contains(t, ft.Errors()[0], "tracktest: invalid option")
		})
	}
}

// A failed check says which requests were still open, with what each holds
// in flight: a tensor one of them holds may be freed when it ends.
func TestFindNamesRequestsStillOpen(t *testing.T) {
	e := newEnv(t, "open")
	ctx, end := track.WithRequest(context.Background())
	x, err := tensor.New(track.WithLabels(ctx, "route", "/generate"), e.alloc, tensor.Float32, 256)
	require.NoError(t, err)
	err = tracktest.Find(e.tr, fast...)
	var le *tracktest.LeakError
	require.ErrorAs(t, err, &le)
	require.Len(t, le.Open, 1)
	assert.Equal(t, int64(1024), le.Open[0].InFlightBytes)
	assert.Equal(t, "{route=/generate}", le.Open[0].Labels.String())
	assert.Contains(t, err.Error(), "Still open when the check ended")
	assert.Contains(t, err.Error(), "1 KiB in 1 tensor, open ")

	end()
	err = tracktest.Find(e.tr, fast...)
	require.ErrorAs(t, err, &le)
	assert.Empty(t, le.Open, "an ended request is open no more")
	assert.NotContains(t, err.Error(), "Still open")
	require.NoError(t, x.Free())
}
