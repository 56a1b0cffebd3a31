package track_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// newTracker returns a fresh tracker and checks, when the test ends, that
// every record made in it was released.
func newTracker(t *testing.T, opts ...track.Option) *track.Tracker {
	t.Helper()
	tr, err := track.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })
	return tr
}

// release releases every record in rs, failing the test on an error.
func release(t testing.TB, tr *track.Tracker, rs ...*track.Record) {
	t.Helper()
	for _, r := range rs {
		require.NoError(t, r.Release())
	}
}

// recordAt records from a distinct line per call site so tests get distinct
// sites on demand.
//
//go:noinline
func recordA(tr *track.Tracker, ctx context.Context, bytes int64, kind string) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta(kind, "host", "float32", []int{int(bytes / 4)})}
	if err := tr.Books().Record(ctx, r, 0); err != nil {
		panic(err)
	}
	return r
}

//go:noinline
func recordB(tr *track.Tracker, ctx context.Context, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("mask", "host", "bool", []int{int(bytes)})}
	if err := tr.Books().Record(ctx, r, 0); err != nil {
		panic(err)
	}
	return r
}

func TestSitesAreInternedPerStack(t *testing.T) {
	tr := newTracker(t)
	ctx := context.Background()
	var recs []*track.Record
	for range 3 {
		recs = append(recs, recordA(tr, ctx, 16, "tensor"))
	}
	recs = append(recs, recordB(tr, ctx, 8))
	assert.Same(t, recs[0].Site(), recs[1].Site())
	assert.Same(t, recs[0].Site(), recs[2].Site())
	assert.NotSame(t, recs[0].Site(), recs[3].Site())
	assert.Equal(t, 2, tr.Totals().Sites)

	loc := recs[0].Site().Location()
	assert.Equal(t, "github.com/tensorlife/tensorlife/track_test.recordA", loc.Function)
	assert.Contains(t, loc.File, "track_test.go")
	assert.Greater(t, loc.Line, 0)
	assert.Contains(t, recs[0].Site().Stack(""), "TestSitesAreInternedPerStack")
	for _, r := range recs {
		require.NoError(t, r.Release())
	}
}

func TestStackTableOverflowIsCounted(t *testing.T) {
	tr := newTracker(t, track.MaxSites(1))
	ctx := context.Background()
	a := recordA(tr, ctx, 16, "tensor")
	b := recordB(tr, ctx, 8)
	c := recordB(tr, ctx, 8)
	assert.False(t, a.Site().Overflow())
	assert.True(t, b.Site().Overflow())
	assert.Same(t, b.Site(), c.Site())
	assert.Equal(t, format.OverflowFunction, b.Site().Location().Function)
	tt := tr.Totals()
	assert.EqualValues(t, 2, tt.Overflowed)
	assert.Equal(t, 1, tt.Sites)

	snap := tr.Snapshot()
	require.Len(t, snap.Top(5), 2)
	assert.True(t, snap.Top(5)[1].Site.Overflow() || snap.Top(5)[0].Site.Overflow())
	for _, r := range []*track.Record{a, b, c} {
		require.NoError(t, r.Release())
	}
}

func TestReleaseMisuse(t *testing.T) {
	tr := newTracker(t, track.Name("one"))
	ctx := context.Background()
	r := recordA(tr, ctx, 16, "tensor")

	assert.ErrorIs(t, tr.Books().Record(ctx, r, 0), track.ErrMisuse)
	require.NoError(t, r.Release())
	assert.ErrorIs(t, r.Release(), track.ErrMisuse)
	assert.ErrorIs(t, (&track.Record{}).Release(), track.ErrMisuse)
	assert.ErrorIs(t, (*track.Record)(nil).Release(), track.ErrMisuse)
	assert.ErrorIs(t, tr.Books().Record(ctx, nil, 0), track.ErrMisuse)
	assert.ErrorIs(t, tr.Books().Record(ctx, &track.Record{Bytes: -1}, 0), track.ErrMisuse)
	// A record that was never recorded has no tracker to count it.
	assert.EqualValues(t, 4, tr.Totals().Misuse)
	assert.EqualValues(t, 0, tr.Totals().LiveCount)
}

func TestInvalidOptions(t *testing.T) {
	for name, opt := range map[string]track.Option{
		"zero sites": track.MaxSites(0), "empty name": track.Name(""),
		"nil callback": track.OnLeak(nil), "nil logger": track.Logger(nil), "nil option": nil,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := track.New(opt)
			assert.ErrorIs(t, err, track.ErrInvalidOption)
		})
	}
	_, err := newTracker(t).SnapshotOf(track.Filter{MinAge: -time.Second})
	assert.ErrorIs(t, err, track.ErrInvalidOption)
}

func TestTotalsAndPeak(t *testing.T) {
	tr := newTracker(t)
	ctx := context.Background()
	a := recordA(tr, ctx, 100, "tensor")
	b := recordA(tr, ctx, 50, "tensor")
	require.NoError(t, a.Release())
	c := recordB(tr, ctx, 10)
	tt := tr.Totals()
	assert.EqualValues(t, 2, tt.LiveCount)
	assert.EqualValues(t, 60, tt.LiveBytes)
	assert.EqualValues(t, 150, tt.PeakBytes)
	assert.EqualValues(t, 3, tt.Allocs)
	assert.EqualValues(t, 160, tt.AllocBytes)
	assert.EqualValues(t, 1, tt.Frees)
	require.NoError(t, b.Release())
	require.NoError(t, c.Release())
}

func TestSnapshotGroupsAndFilters(t *testing.T) {
	tr := newTracker(t)
	r1 := track.WithLabels(context.Background(), "request", "r1")
	r2 := track.WithLabels(context.Background(), "request", "r2")

	var recs []*track.Record
	for _, ctx := range []context.Context{r1, r1, r2} { // one call site: one stack
		recs = append(recs, recordA(tr, ctx, 16, "tensor"))
	}
	recs = append(recs, recordB(tr, r1, 1000))
	snap := tr.Snapshot()

	require.Len(t, snap.Allocations, 4)
	assert.Less(t, snap.Allocations[0].ID, snap.Allocations[3].ID, "allocations sorted by id")
	require.Len(t, snap.Sites, 2)
	assert.EqualValues(t, 1000, snap.Sites[0].LiveBytes, "largest site first")
	assert.EqualValues(t, 3, snap.Sites[1].LiveCount)
	assert.EqualValues(t, 48, snap.Sites[1].AllocBytes)
	// recordA's tensors split by request label into two groups.
	require.Len(t, snap.Groups, 3)
	var counts []int64
	for _, g := range snap.Groups {
		counts = append(counts, g.Count)
	}
	assert.ElementsMatch(t, []int64{2, 1, 1}, counts)

	masks, err := tr.SnapshotOf(track.Filter{Kind: "mask"})
	require.NoError(t, err)
	require.Len(t, masks.Sites, 2, "every site is listed, for its cumulative figures")
	assert.EqualValues(t, 1000, masks.Sites[0].LiveBytes)
	assert.Zero(t, masks.Sites[1].LiveCount, "live figures count only the filter's matches")
	assert.EqualValues(t, 48, masks.Sites[1].AllocBytes)
	require.Len(t, masks.Top(5), 1)
	assert.Empty(t, masks.Allocations, "allocations only listed on request")

	onlyR2, err := tr.SnapshotOf(track.Filter{Labels: map[string]string{"request": "r2"}, Allocations: true})
	require.NoError(t, err)
	require.Len(t, onlyR2.Allocations, 1)
	assert.Equal(t, recs[2].ID(), onlyR2.Allocations[0].ID)

	aged, err := tr.SnapshotOf(track.Filter{MinAge: time.Hour})
	require.NoError(t, err)
	assert.Empty(t, aged.Groups)

	require.NoError(t, (recs[3]).Release())
	for _, r := range recs[:3] {
		require.NoError(t, r.Release())
	}
	sites := tr.SiteTotals()
	require.Len(t, sites, 2)
	for _, s := range sites {
		assert.Zero(t, s.LiveBytes)
	}
}

func TestLabels(t *testing.T) {
	ctx := track.WithLabels(context.Background(), "b", "2", "a", "1")
	ctx = track.WithLabels(ctx, "a", "3")
	l := track.LabelsFrom(ctx)
	assert.Equal(t, "{a=3, b=2}", l.String())
	got, found := l.Get("a")
	assert.True(t, found)
	assert.Equal(t, "3", got)
	assert.Equal(t, 2, l.Len())
	assert.True(t, l.Equal(track.NewLabels("b", "2", "a", "3")))
	odd := track.NewLabels("a", "1", "dangling")
	v, ok := odd.Get("!BADKEY")
	assert.True(t, ok)
	assert.Equal(t, "dangling", v)
	assert.Equal(t, 0, track.LabelsFrom(context.Background()).Len())
	assert.Same(t, ctx, track.WithLabels(ctx))
}

func TestConcurrentRecordRelease(t *testing.T) {
	tr := newTracker(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := track.WithLabels(context.Background(), "worker", string(rune('a'+g)))
			var held []*track.Record
			for i := range 500 {
				if i%2 == 0 {
					held = append(held, recordA(tr, ctx, 8, "tensor"))
				} else {
					held = append(held, recordB(tr, ctx, 4))
				}
				if i%3 == 0 {
					_ = tr.Snapshot()
				}
				if len(held) > 10 {
					assert.NoError(t, (held[0]).Release())
					held = held[1:]
				}
			}
			for _, r := range held {
				assert.NoError(t, r.Release())
			}
		}()
	}
	wg.Wait()
	tt := tr.Totals()
	assert.EqualValues(t, 0, tt.LiveCount)
	assert.EqualValues(t, 0, tt.LiveBytes)
	assert.EqualValues(t, 4000, tt.Allocs)
	assert.EqualValues(t, 4000, tt.Frees)
	assert.Equal(t, 2, tt.Sites)
}

func TestDefaultTrackerIsShared(t *testing.T) {
	assert.Same(t, track.Default(), track.Default())
	assert.Equal(t, "default", track.Default().Name())
}

func TestWatchLeaksSubscribes(t *testing.T) {
	tr := newTracker(t, track.OnLeak(func(track.LeakReport) {}))
	var got []uint64
	stop := tr.WatchLeaks(func(l track.LeakReport) { got = append(got, l.ID) })
	a := recordA(tr, context.Background(), 8, "tensor")
	b := recordA(tr, context.Background(), 8, "tensor")
	assert.True(t, a.ReportDropped(nil, ""), "reclaimed: the ReclaimLeaks default")
	a.ReportDropped(nil, "") // each record's own handle is reported once
	stop()
	stop()
	b.ReportDropped(nil, "")
	assert.Equal(t, []uint64{a.ID()}, got)
	assert.EqualValues(t, 2, tr.Totals().GCLeaks)
	require.NoError(t, a.Release())
	require.NoError(t, b.Release())
}

func TestGroupsByLabelContent(t *testing.T) {
	tr := newTracker(t)
	var recs []*track.Record
	for range 3 { // equal labels from separate WithLabels calls
		ctx := track.WithLabels(context.Background(), "model", "m")
		recs = append(recs, recordA(tr, ctx, 8, "tensor"))
	}
	recs = append(recs, recordA(tr, track.WithLabels(context.Background(), "model", "other"), 8, "tensor"))
	snap := tr.Snapshot()
	require.Len(t, snap.Groups, 2, "one group per distinct label content")
	assert.ElementsMatch(t, []int64{3, 1}, []int64{snap.Groups[0].Count, snap.Groups[1].Count})
	assert.Nil(t, snap.Top(-1))
	assert.Nil(t, snap.Top(0))
	for _, r := range recs {
		require.NoError(t, r.Release())
	}
	//lint:ignore SA1012 WithLabels reads a nil ctx as context.Background(); this checks that it does
	assert.Equal(t, "{a=1}", track.LabelsFrom(track.WithLabels(nil, "a", "1")).String())
}

// Select narrows a snapshot with the same filter SnapshotOf applies: the
// same groups, whichever way the filter was applied.
func TestSelectFiltersAsSnapshotOf(t *testing.T) {
	tr := newTracker(t)
	ctx := track.WithLabels(context.Background(), "request", "r1")
	var recs []*track.Record
	for _, dev := range []string{"cuda:0", "cuda:1", "cuda:1"} {
		r := &track.Record{Bytes: 64, Meta: track.InternMeta("mask", dev, "bool", []int{8, 8})}
		require.NoError(t, tr.Books().Record(ctx, r, 0))
		recs = append(recs, r)
	}
	for _, f := range []track.Filter{{Device: "cuda:1"}, {Kind: "mask"}, {Kind: "tensor"},
		{Labels: map[string]string{"request": "r1"}}, {Device: "cuda:0", Labels: map[string]string{"request": "r2"}}} {
		direct, err := tr.SnapshotOf(f)
		require.NoError(t, err)
		selected, err := tr.Snapshot().Select(f)
		require.NoError(t, err)
		assert.Equal(t, direct.Groups, selected.Groups, "filter %+v", f)
	}
	for _, r := range recs {
		require.NoError(t, r.Release())
	}
}

// Past the bound on classes, new kinds are counted under otherKind while
// every class given an id keeps its own figures.
func TestLiveByClassKeepsListedClassesPastTheBound(t *testing.T) {
	tr := newTracker(t)
	// Record ids are consecutive and spread over 64 shards, so 64 records
	// of a kind put it on every shard.
	const perKind, kinds, listed = 64, 70, 63
	var recs []*track.Record
	seen := map[string]track.ClassStats{}
	for k := range kinds {
		kind := fmt.Sprintf("kind%02d", k)
		for range perKind {
			r := &track.Record{Bytes: int64(k + 1), Meta: track.InternMeta(kind, "host", "uint8", []int{k + 1})}
			require.NoError(t, tr.Books().Record(context.Background(), r, 0))
			recs = append(recs, r)
		}
		byKind := map[string]track.ClassStats{}
		for _, c := range tr.Books().LiveByClass() {
			byKind[c.Kind] = c
		}
		for name, c := range seen {
			if name != "tensorlife.other" {
				assert.Equal(t, c, byKind[name], "class %s after %d kinds", name, k+1)
			}
		}
		seen = byKind
	}

	classes := tr.Books().LiveByClass()
	require.Len(t, classes, listed+1)
	// otherKind has no device, so it sorts first.
	for k := range listed {
		assert.Equal(t, track.ClassStats{Device: "host", Kind: fmt.Sprintf("kind%02d", k), LiveCount: perKind, LiveBytes: perKind * int64(k+1)}, classes[1+k])
	}
	var otherBytes int64
	for k := listed; k < kinds; k++ {
		otherBytes += perKind * int64(k+1)
	}
	assert.Equal(t, track.ClassStats{Kind: "tensorlife.other", LiveCount: perKind * (kinds - listed), LiveBytes: otherBytes}, classes[0])
	for _, r := range recs {
		require.NoError(t, r.Release())
	}
}

// A site snapshot holds the per-site figures SnapshotOf lists, from the
// counters alone, and compares with snapshots of its tracker.
func TestSiteSnapshotMatchesSnapshotSites(t *testing.T) {
	tr := newTracker(t)
	ctx := context.Background()
	a := recordA(tr, ctx, 16, "tensor")
	b := recordB(tr, ctx, 8)
	require.NoError(t, b.Release())
	full, err := tr.SnapshotOf(track.Filter{Kind: "tensor"})
	require.NoError(t, err)
	sites := tr.SiteSnapshot()
	assert.Same(t, tr, sites.Tracker)
	assert.Same(t, full.Tracker, sites.Tracker)
	assert.Equal(t, tr.Name(), sites.TrackerName)
	assert.Empty(t, sites.Groups)
	assert.Empty(t, sites.Allocations)
	assert.Equal(t, full.Totals, sites.Totals)
	require.Len(t, sites.Sites, len(full.Sites))
	for i, st := range sites.Sites {
		assert.Same(t, full.Sites[i].Site, st.Site)
		assert.Equal(t, full.Sites[i].AllocCount, st.AllocCount)
		assert.Equal(t, full.Sites[i].AllocBytes, st.AllocBytes)
	}
	require.NoError(t, a.Release())
}

// Labels are bounded whatever a request puts in them: long keys and values
// are cut, keys past the bound dropped and counted, and nothing is refused.
func TestLabelsAreBounded(t *testing.T) {
	tr := newTracker(t)
	huge := strings.Repeat("x", 1<<20)
	kv := []string{"id", huge, strings.Repeat("k", 1000), "v"}
	for i := range 40 {
		kv = append(kv, fmt.Sprintf("key%02d", i), "é"+strings.Repeat("é", 300))
	}
	ctx := track.WithLabels(context.Background(), kv...)
	r := recordA(tr, ctx, 8, "tensor")
	l := r.Labels()
	assert.Equal(t, 16, l.Len())
	assert.Less(t, len(l.String()), 16*(2*256+8), "a bounded rendering")
	id, ok := l.Get("id")
	require.True(t, ok)
	assert.Len(t, id, 256-len("…")+len("…"))
	assert.True(t, strings.HasSuffix(id, "…"), "a cut value is marked")
	dropped, ok := l.Get("!DROPPED")
	require.True(t, ok)
	assert.Equal(t, "27", dropped, "42 keys given, 15 kept, the rest counted")
	l.Range(func(k, v string) bool {
		assert.True(t, utf8.ValidString(k) && utf8.ValidString(v), "cut at a rune boundary")
		return true
	})
	assert.Equal(t, int64(1), tr.Totals().LabelsTruncated)
	release(t, tr, r)

	again := track.WithLabels(ctx, "more", "labels")
	d, _ := track.LabelsFrom(again).Get("!DROPPED")
	assert.Equal(t, "28", d, "dropping again adds to the count")
	assert.Equal(t, 16, track.LabelsFrom(again).Len())
	seen := map[string]bool{}
	track.LabelsFrom(again).Range(func(k, _ string) bool {
		assert.False(t, seen[k], "key %q twice", k)
		seen[k] = true
		return true
	})
}

// A label set renders unambiguously: separators in values are quoted.
func TestLabelsStringQuotes(t *testing.T) {
	a := track.NewLabels("a", "1, b=2")
	b := track.NewLabels("a", "1", "b", "2")
	assert.NotEqual(t, a.String(), b.String())
	assert.Equal(t, `{a="1, b=2"}`, a.String())
	assert.Equal(t, "{a=1, b=2}", b.String())
}

// Filter.LabelKeys groups by the listed keys alone: labels no profile shows
// do not split groups, and groups carry only the listed keys.
func TestGroupsByLabelKeys(t *testing.T) {
	tr := newTracker(t)
	var recs []*track.Record
	for i := range 6 {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprint(i), "model", []string{"a", "b"}[i%2])
		recs = append(recs, recordA(tr, ctx, 8, "tensor"))
	}
	count := func(f track.Filter) (int, []track.Labels) {
		snap, err := tr.SnapshotOf(f)
		require.NoError(t, err)
		var ls []track.Labels
		for _, g := range snap.Groups {
			ls = append(ls, g.Labels)
		}
		return len(snap.Groups), ls
	}
	n, _ := count(track.Filter{})
	assert.Equal(t, 6, n, "nil LabelKeys: every label tells groups apart")
	n, ls := count(track.Filter{LabelKeys: []string{}})
	assert.Equal(t, 1, n, "no keys: one group")
	assert.Zero(t, ls[0].Len())
	n, ls = count(track.Filter{LabelKeys: []string{"model"}})
	assert.Equal(t, 2, n)
	for _, l := range ls {
		assert.Equal(t, 1, l.Len(), "a group carries only the listed keys")
	}
	sel, err := tr.Snapshot().Select(track.Filter{LabelKeys: []string{"model"}})
	require.NoError(t, err)
	assert.Len(t, sel.Groups, 2, "Select groups as SnapshotOf does")
	release(t, tr, recs...)
}

// The bound on classes is the tracker's, not each shard's: 5,000 kinds
// spread over every shard make at most 64 classes, the rest counted as
// "tensorlife.other", and a class with nothing live is not listed.
func TestLiveByClassIsBoundedPerTracker(t *testing.T) {
	tr := newTracker(t)
	var recs []*track.Record
	for k := range 5000 {
		r := &track.Record{Bytes: 1, Meta: track.InternMeta(fmt.Sprintf("kind%04d", k), "host", "uint8", nil)}
		require.NoError(t, tr.Books().Record(context.Background(), r, 0))
		recs = append(recs, r)
	}
	classes := tr.Books().LiveByClass()
	assert.Len(t, classes, 64)
	var total int64
	for _, c := range classes {
		total += c.LiveCount
	}
	assert.Equal(t, int64(5000), total, "nothing is lost")
	release(t, tr, recs...)
	assert.Empty(t, tr.Books().LiveByClass(), "classes with nothing live are not listed")
}

// A leak callback is foreign code on the cleanup goroutine: its panic is
// recovered, and the leak still counted and passed to the others.
func TestLeakCallbackPanicIsRecovered(t *testing.T) {
	tr := newTracker(t, track.OnLeak(func(track.LeakReport) { panic("callback bug") }),
		track.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	var seen []uint64
	stop := tr.WatchLeaks(func(l track.LeakReport) { seen = append(seen, l.ID) })
	defer stop()
	r := recordA(tr, context.Background(), 8, "tensor")
	assert.NotPanics(t, func() { r.ReportDropped(nil, "") })
	tr.Books().WaitLeaks()
	assert.Equal(t, []uint64{r.ID()}, seen, "the other callbacks still hear of it")
	assert.EqualValues(t, 1, tr.Totals().PartPanics, "the panic is counted")
	assert.Equal(t, int64(1), tr.Totals().GCLeaks)
	release(t, tr, r)
}

type hugeReserver struct{ _ int }

func (*hugeReserver) PartInfo() track.PartInfo {
	return track.PartInfo{Device: "gpu", Reserved: math.MaxInt64 / 2, Left: -1}
}

// ReservedOn saturates rather than wrapping below zero.
func TestReservedOnSaturates(t *testing.T) {
	tr := newTracker(t)
	a, b, c := &hugeReserver{}, &hugeReserver{}, &hugeReserver{}
	track.Attach(tr, a)
	track.Attach(tr, b)
	track.Attach(tr, c)
	assert.Equal(t, int64(math.MaxInt64), tr.ReservedOn("gpu"))
	runtime.KeepAlive([]*hugeReserver{a, b, c})
}
