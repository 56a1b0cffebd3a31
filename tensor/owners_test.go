package tensor_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// leakHeld is the check of a leak that a live handle holds on purpose:
// nothing can free it while the check settles, so the check does not wait
// out tracktest's default settle.
var leakHeld = tracktest.MaxSettle(0)

// nextLine returns the file:line after the caller's, as reports print it.
func nextLine(t *testing.T) string {
	t.Helper()
	_, file, n, ok := runtime.Caller(1)
	require.True(t, ok)
	return filepath.Base(file) + ":" + strconv.Itoa(n+1)
}

func TestViewKeptAfterParentFreeIsReportedAtTheView(t *testing.T) {
	_, tr, alloc := setupUnchecked(t, 1<<20)
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 8)
	require.NoError(t, err)
	viewLine := nextLine(t)
	v, err := x.View(0, 4)
	require.NoError(t, err)
	require.NoError(t, x.Free())

	snap := tr.Snapshot()
	require.Len(t, snap.Allocations, 1)
	hs := snap.Allocations[0].Holders
	require.Len(t, hs, 1, "only the view holds the memory")
	assert.Equal(t, "View", hs[0].How)
	assert.Equal(t, 1, hs[0].Live)
	assert.Equal(t, v.HandleSite(), hs[0].Site)

	err = tracktest.Find(tr, leakHeld)
	require.ErrorIs(t, err, tracktest.ErrLeaked)
	assert.Contains(t, err.Error(), "held by a View made at "+viewLine)
	require.NoError(t, v.Free())
	assert.NoError(t, tracktest.Find(tr))
}

func TestRetainNeverFreedIsReportedAtTheRetain(t *testing.T) {
	_, tr, alloc := setupUnchecked(t, 1<<20)
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 64)
	require.NoError(t, err)
	retainLine := nextLine(t)
	kept, err := x.Retain()
	require.NoError(t, err)
	require.NoError(t, x.Free())

	err = tracktest.Find(tr, leakHeld)
	require.ErrorIs(t, err, tracktest.ErrLeaked)
	msg := err.Error()
	assert.Contains(t, msg, "held by a Retain made at "+retainLine+" (")
	assert.NotContains(t, msg, "its own handle", "the freed handle holds nothing")
	require.NoError(t, kept.Free())
}

func TestHoldersListEveryLiveHandle(t *testing.T) {
	_, tr, alloc := setup(t, 1<<20)
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 64)
	require.NoError(t, err)
	var rs []*tensor.Tensor
	for range 2 {
		r, err := x.Retain() // one line, two handles
		require.NoError(t, err)
		rs = append(rs, r)
	}
	hs := tr.Snapshot().Allocations[0].Holders
	require.Len(t, hs, 2)
	assert.Equal(t, "allocation", hs[0].How)
	assert.Equal(t, x.Site(), hs[0].Site)
	assert.Equal(t, "Retain", hs[1].How)
	assert.Equal(t, 2, hs[1].Live)
	for _, r := range rs {
		require.NoError(t, r.Free())
	}
	hs = tr.Snapshot().Allocations[0].Holders
	require.Len(t, hs, 1)
	assert.Equal(t, "allocation", hs[0].How)
	require.NoError(t, x.Free())
}

//go:noinline
func dropRetain(t *testing.T, x *tensor.Tensor) {
	_, err := x.Retain()
	require.NoError(t, err)
}

func TestDroppedRetainsAreReportedEachAtItsLine(t *testing.T) {
	_, tr, alloc := setupUnchecked(t, 1<<20)
	var reports []track.LeakReport
	done := make(chan struct{}, 8)
	stop := tr.WatchLeaks(func(l track.LeakReport) {
		reports = append(reports, l)
		done <- struct{}{}
	})

	defer stop()
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 64)
	require.NoError(t, err)
	var lines []string
	lines = append(lines, nextLine(t))
	dropRetain(t, x)
	lines = append(lines, nextLine(t))
	dropRetain(t, x)
	lines = append(lines, nextLine(t))
	dropRetain(t, x)

	for range 3 {
		runtime.GC()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatal("a dropped handle was not reported")
		}
	}
	require.Len(t, reports, 3, "three dropped handles, three reports")
	var got []string
	for _, r := range reports {
		assert.Equal(t, x.ID(), r.ID)
		assert.Equal(t, "Retain", r.Holder.How)
		require.NotNil(t, r.Holder.Site)
		assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.dropRetain", r.Holder.Site.Location().Function)
		assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.TestDroppedRetainsAreReportedEachAtItsLine",
			r.Holder.Site.UserFrames()[1].Function, "each report has the handle's own stack")
		f := r.Holder.Site.UserFrames()[1]
		got = append(got, filepath.Base(f.File)+":"+strconv.Itoa(f.Line))
	}
	assert.ElementsMatch(t, lines, got, "each report names the line that made its handle")
	assert.EqualValues(t, 3, tr.Totals().GCLeaks)
	require.NoError(t, x.Free(), "the tracker reclaimed the three, the own handle frees the memory")
	assert.EqualValues(t, 0, tr.Totals().LiveCount)
}

func TestDroppedRetainsInACheckAreThreeLeaks(t *testing.T) {
	_, tr, alloc := setupUnchecked(t, 1<<20, track.ReclaimLeaks(false))
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 64)
	require.NoError(t, err)
	dropRetain(t, x)
	dropRetain(t, x)
	dropRetain(t, x)
	require.NoError(t, x.Free())
	for i := 0; i < 50 && tr.Totals().GCLeaks < 3; i++ {
		collect()
	}
	require.EqualValues(t, 3, tr.Totals().GCLeaks)

	hs := tr.Snapshot().Allocations[0].Holders
	require.Len(t, hs, 3, "three lines made the three handles")
	for _, h := range hs {
		assert.Equal(t, track.Holder{Site: h.Site, How: "Retain", Dropped: 1}, h)
	}

	err = tracktest.Find(tr)
	var le *tracktest.LeakError
	require.ErrorAs(t, err, &le)
	assert.Zero(t, le.Count(tracktest.Live), "no handle of it is live")
	assert.Equal(t, 3, le.Count(tracktest.Dropped),
		"found before the check, each dropped Retain is still listed at the line that made it")
	for _, l := range le.Leaks {
		assert.Equal(t, "Retain", l.Holder.How)
		assert.Contains(t, err.Error(), "dropped without Free (found by the garbage collector): "+l.Holder.String())
	}
}
