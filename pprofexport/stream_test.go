package pprofexport_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// TestWrittenProfileIsProfile guards the streaming writers: what Write
// encodes as it reads the snapshot is, once parsed, the profile Profile
// builds, sample for sample, with labels, held-by owners, leaked halves,
// long shapes, renamed request labels and the stacks.
func TestWrittenProfileIsProfile(t *testing.T) {
	prog := newProgram(t, track.ReclaimLeaks(false))
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	prog.churn("r1", 4)
	v := keepView(t, prog.alloc)
	t.Cleanup(func() { require.NoError(t, v.Free()) })
	ctx := track.WithLabels(context.Background(), "bytes", "b", "label_x", "lx", "model", "m1", "empty", "")
	recs := make([]track.Record, 3)
	for i := range recs {
		recs[i] = track.Record{Bytes: 4096, Meta: track.InternMeta("mask", "host", "bool", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})}
		require.NoError(t, prog.tracker.Books().Record(ctx, &recs[i], 0))
	}
	zero := track.Record{Meta: track.InternMeta("empty", "host", "bool", []int{0})}
	require.NoError(t, prog.tracker.Books().Record(ctx, &zero, 0))
	t.Cleanup(func() {
		for i := range recs {
			require.NoError(t, (&recs[i]).Release())
		}
		require.NoError(t, zero.Release())
	})
	(&recs[0]).ReportDropped(nil, "")

	for _, opts := range [][]pprofexport.ProfileOption{
		nil,
		{pprofexport.LabelKeys("model")},
		{pprofexport.LabelKeys()},
		{pprofexport.KeepLibraryFrames(true)},
		{pprofexport.Outlived()},
	} {
		snap := prog.tracker.Snapshot()
		built, err := pprofexport.Profile(snap, opts...)
		require.NoError(t, err)
		var want, got bytes.Buffer
		require.NoError(t, built.Write(&want))
		require.NoError(t, pprofexport.Write(&got, snap, opts...))
		wantP, err := profile.Parse(&want)
		require.NoError(t, err)
		gotP, err := profile.Parse(&got)
		require.NoError(t, err)
		require.NoError(t, gotP.CheckValid())
		assert.Equal(t, wantP.String(), gotP.String(), "options %v", opts)
		assert.Equal(t, wantP.DocURL, gotP.DocURL)
		assert.Equal(t, wantP.DefaultSampleType, gotP.DefaultSampleType)
		assert.Equal(t, wantP.Mapping, gotP.Mapping)
	}
	empty, err := track.New()
	require.NoError(t, err)
	var got bytes.Buffer
	require.NoError(t, pprofexport.Write(&got, empty.Snapshot()))
	p, err := profile.Parse(&got)
	require.NoError(t, err)
	assert.Empty(t, p.Sample, "an empty snapshot is a valid profile with no samples")
}

// uniquelyLabelled returns a tracker whose n live tensors each carry a
// request id of their own, one site and one shape.
func uniquelyLabelled(t testing.TB, n int) *track.Tracker {
	tr, err := track.New(track.Name("labelled"))
	require.NoError(t, err)
	recs := make([]track.Record, n)
	meta := track.InternMeta("activation", "host", "float16", []int{64})
	for i := range recs {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprintf("req-%08d", i))
		recs[i].Bytes, recs[i].Meta = 128, meta
		require.NoError(t, tr.Books().Record(ctx, &recs[i], 0))
	}
	t.Cleanup(func() {
		for i := range recs {
			require.NoError(t, (&recs[i]).Release())
		}
	})
	return tr
}

// The tests of what a LabelKeys profile costs at scale hold it to a bound
// per group: costBound for costGroups groups of unique request ids, 64 MiB
// at 200k halved with the groups (335 B a group), so that a cost that
// grows with the groups fails as it did at 200k, in half the time.
const (
	costGroups = 100_000
	costBound  = uint64(64<<20) * costGroups / 200_000
)

// labelledShared is the tracker of costGroups uniquely labelled tensors
// that the tests of what a LabelKeys profile costs share, built once per
// test binary: each test reads it, none changes it, and building it is a
// good part of their time. Its tensors stay live until the process ends.
var labelledShared struct {
	once sync.Once
	tr   *track.Tracker
	recs []track.Record
}

// sharedLabelled returns labelledShared's tracker, building it on first use.
func sharedLabelled(t *testing.T) *track.Tracker {
	t.Helper()
	labelledShared.once.Do(func() {
		tr, err := track.New(track.Name("labelled"))
		if err != nil {
			panic(err) // valid options
		}
		labelledShared.tr, labelledShared.recs = tr, make([]track.Record, costGroups)
		meta := track.InternMeta("activation", "host", "float16", []int{64})
		for i := range labelledShared.recs {
			ctx := track.WithLabels(context.Background(), "request", fmt.Sprintf("req-%08d", i))
			labelledShared.recs[i].Bytes, labelledShared.recs[i].Meta = 128, meta
			if err := tr.Books().Record(ctx, &labelledShared.recs[i], 0); err != nil {
				panic(err) // a fresh record of a fresh tracker
			}
		}
	})
	require.Equal(t, int64(costGroups), labelledShared.tr.Totals().LiveCount, "the shared tracker is read, never changed")
	return labelledShared.tr
}

// TestLabelKeysProfileCostsWhatItWrites guards a LabelKeys profile against
// allocating per sample what a profile.Profile and its encoder hold:
// writing the profile of a snapshot of unique request ids allocates at
// most costBound (at 200k ids, 64 MiB; it took 647 MiB when built, then
// encoded), a small multiple of the bytes it writes.
func TestLabelKeysProfileCostsWhatItWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("100k tensors")
	}
	tr := sharedLabelled(t)
	snap, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{"request"}})
	require.NoError(t, err)
	require.Len(t, snap.Groups, costGroups)

	var out countingWriter
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	require.NoError(t, pprofexport.Write(&out, snap, pprofexport.LabelKeys("request")))
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a LabelKeys(request) profile of %d ids: %.1f MiB allocated for %.0f KiB written (%.1f×)", costGroups,
		float64(allocated)/(1<<20), float64(int64(out))/(1<<10), float64(allocated)/float64(int64(out)))
	assert.LessOrEqual(t, allocated, costBound)
	assert.Less(t, float64(allocated), 64*float64(int64(out)), "a small multiple of what it writes")
	runtime.KeepAlive(snap)

	// A diff or delta of the same labels adds them up in a table of a few
	// dozen bytes per sample, not in three profiles.
	out = 0
	runtime.GC()
	runtime.ReadMemStats(&before)
	require.NoError(t, pprofexport.WriteDiff(&out, snap, snap, pprofexport.LabelKeys("request")))
	runtime.ReadMemStats(&after)
	allocated = after.TotalAlloc - before.TotalAlloc
	t.Logf("a LabelKeys(request) diff of %d ids: %.1f MiB allocated for %d bytes written", costGroups,
		float64(allocated)/(1<<20), int64(out))
	assert.LessOrEqual(t, allocated, costBound)

	// The text view shows no label: under LabelKeys it groups by none (it
	// took 280 MiB for 667 bytes).
	h := newHandler(t, tr, pprofexport.LabelKeys("request"))
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath+"?debug=1", nil))
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusOK, rec.Code)
	allocated = after.TotalAlloc - before.TotalAlloc
	t.Logf("?debug=1 under LabelKeys(request): %.0f KiB allocated for %d bytes", float64(allocated)/(1<<10), rec.Body.Len())
	assert.Less(t, allocated, uint64(1<<20))
}

// BenchmarkWriteLabelKeys measures writing a LabelKeys(request) profile of
// 200k uniquely labelled groups: bytes allocated per byte written, and per
// sample.
func BenchmarkWriteLabelKeys(b *testing.B) {
	tr := uniquelyLabelled(b, 200_000)
	snap, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{"request"}})
	require.NoError(b, err)
	var out countingWriter
	var before, after runtime.MemStats
	b.ReportAllocs()
	runtime.ReadMemStats(&before)
	for b.Loop() {
		require.NoError(b, pprofexport.Write(&out, snap, pprofexport.LabelKeys("request")))
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(int64(out)), "alloc-bytes/written-byte")
}

// BenchmarkStreamedProfile compares writing a snapshot's profile as it is
// read (Write) with building the profile.Profile and encoding it, at the
// same compression level, in alternating rounds: 1,000 sites without
// labels, and 20k groups of unique request ids under LabelKeys.
func BenchmarkStreamedProfile(b *testing.B) {
	labelled := uniquelyLabelled(b, 20_000)
	labelledSnap, err := labelled.SnapshotOf(track.Filter{LabelKeys: []string{"request"}})
	require.NoError(b, err)
	for _, bc := range []struct {
		name string
		snap *track.Snapshot
		opts []pprofexport.ProfileOption
	}{
		{"sites=1000", liveTensors(b, 10_000).snap, nil},
		{"labelled=20k", labelledSnap, []pprofexport.ProfileOption{pprofexport.LabelKeys("request")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			zw, err := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
			require.NoError(b, err)
			streamed := func() {
				if err := pprofexport.Write(io.Discard, bc.snap, bc.opts...); err != nil {
					b.Fatal(err)
				}
			}
			built := func() {
				p, err := pprofexport.Profile(bc.snap, bc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				zw.Reset(io.Discard)
				if err := p.WriteUncompressed(zw); err != nil {
					b.Fatal(err)
				}
				if err := zw.Close(); err != nil {
					b.Fatal(err)
				}
			}
			settle(b)
			benchratio.Run(b, "streamed", streamed, built, benchratio.BaselineName("built"), benchratio.RoundOps(5))
		})
	}
}

// canonical renders a parsed profile's samples in an order-free form: each
// sample's stack, labels and values, sorted; and the numbers of locations
// and functions, which a merge keeps only where samples use them.
func canonical(t *testing.T, p *profile.Profile) []string {
	t.Helper()
	var out []string
	for _, s := range p.Sample {
		var b strings.Builder
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				fmt.Fprintf(&b, "%s:%d ", ln.Function.Name, ln.Line)
			}
		}
		keys := slices.Sorted(maps.Keys(s.Label))
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%v ", k, s.Label[k])
		}
		for _, k := range slices.Sorted(maps.Keys(s.NumLabel)) {
			fmt.Fprintf(&b, "%s#%v%v ", k, s.NumLabel[k], s.NumUnit[k])
		}
		fmt.Fprintf(&b, "%v", s.Value)
		out = append(out, b.String())
	}
	slices.Sort(out)
	return append(out, fmt.Sprintf("locations %d functions %d time %d duration %d comments %q",
		len(p.Location), len(p.Function), p.TimeNanos, p.DurationNanos, p.Comments))
}

// TestWrittenDiffIsDiffProfile guards the streamed diffs and deltas: what
// WriteDiff and the handler's ?seconds=N write is, once parsed, the profile
// DiffProfile and DeltaProfile build with profile.Merge: the same samples,
// labels and values, nothing that cancelled out, only the stacks used.
func TestWrittenDiffIsDiffProfile(t *testing.T) {
	prog := newProgram(t, track.ReclaimLeaks(false))
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	before := prog.tracker.Snapshot()
	counters := prog.tracker.SiteSnapshot()
	prog.masks("r3", 2)
	prog.churn("r1", 4)
	v := keepView(t, prog.alloc)
	t.Cleanup(func() { require.NoError(t, v.Free()) })
	recs := make([]track.Record, 2)
	ctx := track.WithLabels(context.Background(), "bytes", "b", "model", "m1")
	for i := range recs {
		recs[i] = track.Record{Bytes: 4096, Meta: track.InternMeta("mask", "host", "bool", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})}
		require.NoError(t, prog.tracker.Books().Record(ctx, &recs[i], 0))
	}
	t.Cleanup(func() {
		for i := range recs {
			require.NoError(t, (&recs[i]).Release())
		}
	})
	(&recs[0]).ReportDropped(nil, "")
	after := prog.tracker.Snapshot()

	parse := func(b []byte) *profile.Profile {
		p, err := profile.ParseData(b)
		require.NoError(t, err)
		require.NoError(t, p.CheckValid())
		return p
	}
	for _, tc := range []struct {
		name          string
		before, after *track.Snapshot
		opts          []pprofexport.DiffOption
	}{
		{"diff", before, after, nil},
		{"no change", after, after, nil},
		{"label keys", before, after, []pprofexport.DiffOption{pprofexport.LabelKeys("model")}},
		{"no labels", before, after, []pprofexport.DiffOption{pprofexport.LabelKeys()}},
		{"library frames", before, after, []pprofexport.DiffOption{pprofexport.KeepLibraryFrames(true)}},
		{"from counters", counters, after, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built, err := pprofexport.DiffProfile(tc.before, tc.after, tc.opts...)
			require.NoError(t, err)
			var want, got bytes.Buffer
			require.NoError(t, built.Write(&want))
			require.NoError(t, pprofexport.WriteDiff(&got, tc.before, tc.after, tc.opts...))
			wantC := canonical(t, parse(want.Bytes()))
			assert.Equal(t, wantC, canonical(t, parse(got.Bytes())))
			if tc.before != tc.after {
				assert.Greater(t, len(wantC), 3, "%q", wantC)
			}
		})
	}
	var got bytes.Buffer
	err := pprofexport.WriteDiff(&got, after, before)
	assert.ErrorIs(t, err, pprofexport.ErrSnapshotOrder)
	assert.Zero(t, got.Len(), "nothing is written for a refused pair")
	other, err := track.New()
	require.NoError(t, err)
	assert.ErrorIs(t, pprofexport.WriteDiff(&got, before, other.Snapshot()), pprofexport.ErrTrackerMismatch)
	assert.ErrorIs(t, pprofexport.WriteDiff(&got, nil, before), pprofexport.ErrNilSnapshot)
}

// BenchmarkStreamedDiff compares WriteDiff, which adds both snapshots up
// in a table and streams what is left, with merging the two built profiles
// (DiffProfile) and encoding the result, in alternating rounds: 20k groups
// of unique request ids on both sides, half of them changed.
func BenchmarkStreamedDiff(b *testing.B) {
	tr := uniquelyLabelled(b, 20_000)
	before, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{"request"}})
	require.NoError(b, err)
	recs := make([]track.Record, 10_000)
	meta := track.InternMeta("activation", "host", "float16", []int{64})
	for i := range recs {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprintf("new-%08d", i))
		recs[i].Bytes, recs[i].Meta = 128, meta
		require.NoError(b, tr.Books().Record(ctx, &recs[i], 0))
	}
	b.Cleanup(func() {
		for i := range recs {
			require.NoError(b, (&recs[i]).Release())
		}
	})
	after, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{"request"}})
	require.NoError(b, err)
	opt := pprofexport.LabelKeys("request")
	zw, err := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	require.NoError(b, err)
	streamed := func() {
		if err := pprofexport.WriteDiff(io.Discard, before, after, opt); err != nil {
			b.Fatal(err)
		}
	}
	merged := func() {
		p, err := pprofexport.DiffProfile(before, after, opt)
		if err != nil {
			b.Fatal(err)
		}
		zw.Reset(io.Discard)
		if err := p.WriteUncompressed(zw); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
	}
	settle(b)
	benchratio.Run(b, "streamed", streamed, merged, benchratio.BaselineName("merged"), benchratio.RoundOps(3))
}

// TestLabelKeysRequestCostsWhatItWrites guards the whole handler request of
// a LabelKeys(request) profile of unique labels, the snapshot included:
// at most costBound (64 MiB at 200k), also where each tensor holds a second
// label the profile does not show (BenchmarkLabelKeysProfile measures both
// at 200k and 1M). Grouping and sorting 200k groups by formatted labels took 1.2 GiB,
// and the groups twice over with a string table of their values 88 MiB,
// holding them once 52 MiB (73.5 with the second label); now the walk
// keeps a 72-byte entry a group, the handler reads each Group from it as
// it writes the group's sample (track.Books.GroupsOf), the stream keeps
// none of the values it writes, and the compressed body is kept in blocks
// that are never copied.
func TestLabelKeysRequestCostsWhatItWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("100k tensors")
	}
	var h http.Handler
	for _, model := range []bool{true, false} { // the handler served last is read below
		var tr *track.Tracker
		if model {
			tr = labelledWithModel(t, costGroups)
		} else {
			tr = sharedLabelled(t)
		}
		h = newHandler(t, tr, pprofexport.LabelKeys("request"))
		allocated, written := serveAllocated(t, h, tensorsPath)
		t.Logf("a LabelKeys(request) handler request of %d ids (a label not shown: %v): %.1f MiB allocated for %.0f KiB written",
			costGroups, model, float64(allocated)/(1<<20), float64(written)/(1<<10))
		assert.LessOrEqual(t, allocated, costBound, "a label not shown: %v", model)
	}

	// What it writes is the whole profile: a sample per id, each labelled
	// with its own, the string table spread among the samples.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath, nil))
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	p, err := profile.ParseData(rec.Body.Bytes())
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, s := range p.Sample {
		if s.Value[3] > 0 { // inuse_space: the live samples
			require.Len(t, s.Label["request"], 1)
			ids[s.Label["request"][0]] = true
			assert.Equal(t, []string{"float16"}, s.Label[pprofexport.LabelDType])
		}
	}
	assert.Len(t, ids, costGroups)
	assert.True(t, ids["req-00000000"] && ids[fmt.Sprintf("req-%08d", costGroups-1)])
}
