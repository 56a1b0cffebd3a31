package pprofexport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// Sample value indexes, in the order the package documents.
const (
	allocObjects = iota
	allocSpace
	inuseObjects
	inuseSpace
)

const (
	fnMasks = "github.com/tensorlife/tensorlife/pprofexport_test.buildMasks"
	fnKV    = "github.com/tensorlife/tensorlife/pprofexport_test.buildKV"
)

// leaf returns the innermost function of a sample's stack.
func leaf(s *profile.Sample) string {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
		return ""
	}
	return s.Location[0].Line[0].Function.Name
}

// byLeaf sums each sample value per leaf function.
func byLeaf(p *profile.Profile) map[string][4]int64 {
	out := make(map[string][4]int64)
	for _, s := range p.Sample {
		v := out[leaf(s)]
		for i := range v {
			v[i] += s.Value[i]
		}
		out[leaf(s)] = v
	}
	return out
}

func buildProfile(t *testing.T, snap *track.Snapshot, opts ...pprofexport.ProfileOption) *profile.Profile {
	t.Helper()
	p, err := pprofexport.Profile(snap, opts...)
	require.NoError(t, err)
	require.NoError(t, p.CheckValid())
	return p
}

func TestProfileHeapVocabulary(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 1)
	p := buildProfile(t, prog.snapshot())

	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	assert.Equal(t, []string{"alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"}, types)
	assert.Equal(t, "inuse_space", p.DefaultSampleType)
	require.NotNil(t, p.PeriodType)
	assert.Equal(t, "space", p.PeriodType.Type)
	assert.Equal(t, "bytes", p.PeriodType.Unit)
	require.Len(t, p.Mapping, 1)
	m := p.Mapping[0]
	assert.True(t, m.HasFunctions && m.HasFilenames && m.HasLineNumbers && m.HasInlineFrames,
		"the mapping must say it is symbolized, or pprof looks for the binary")
	exe, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, filepath.Base(exe), m.File, "pprof's web UI heads its views with the file")
	assert.Less(t, m.Start, m.Limit, "a binary named with no address range makes pprof's web UI count samples twice")
	assert.NotZero(t, p.TimeNanos)
	assert.Contains(t, strings.Join(p.Comments, "\n"), `tracker "pprofexport-test"`)
}

func TestProfileValuesPerSite(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	prog.churn("r3", 2)
	p := buildProfile(t, prog.snapshot())

	got := byLeaf(p)
	assert.Equal(t, [4]int64{5, 5 * maskBytes, 3, 3 * maskBytes}, got[fnMasks])
	assert.Equal(t, [4]int64{2, 2 * kvBytes, 2, 2 * kvBytes}, got[fnKV])
	assert.Len(t, got, 2, "every sample's leaf is one of the program's allocating functions: %v", got)
}

func TestProfileStacksAreSymbolized(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 1)
	line := int64(markerLine(t, "line:mask"))

	p := buildProfile(t, prog.snapshot())
	require.NotEmpty(t, p.Sample)
	for _, s := range p.Sample {
		ln := s.Location[0].Line[0]
		assert.Equal(t, fnMasks, ln.Function.Name)
		assert.Equal(t, line, ln.Line)
		assert.True(t, strings.HasSuffix(ln.Function.Filename, "program_test.go"), ln.Function.Filename)
		for _, l := range s.Location {
			assert.NotEqual(t, "runtime.goexit", l.Line[len(l.Line)-1].Function.Name)
		}
	}
}

func TestKeepLibraryFrames(t *testing.T) {
	// Package tensor records from the caller's frame, so its stacks hold no
	// library frame. A record made from a function that track.Guard calls
	// has one: Guard, which calls it.
	tr, err := track.New()
	require.NoError(t, err)
	fromLibrary := &track.Record{Bytes: 64, Meta: track.InternMeta("tensor", "", "int8", []int{64})}
	require.NoError(t, track.Guard(tr, tr, "Record", func() {
		require.NoError(t, tr.Books().Record(context.Background(), fromLibrary, 1))
	}))
	t.Cleanup(func() { assert.NoError(t, fromLibrary.Release()) })
	snap, err := tr.SnapshotOf(track.Filter{Kind: "tensor"})
	require.NoError(t, err)

	const libraryFrame = "github.com/tensorlife/tensorlife/track.Guard" // calls the function
	const self = "github.com/tensorlife/tensorlife/pprofexport_test.TestKeepLibraryFrames"
	tests := []struct {
		name string
		opts []pprofexport.ProfileOption
		want string
	}{
		{"trimmed by default", nil, self},
		{"trimmed", []pprofexport.ProfileOption{pprofexport.KeepLibraryFrames(false)}, self},
		{"kept", []pprofexport.ProfileOption{pprofexport.KeepLibraryFrames(true)}, libraryFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := buildProfile(t, snap, tt.opts...)
			var found bool
			for _, s := range p.Sample {
				if s.Value[inuseSpace] == 64 {
					found = true
					assert.Equal(t, tt.want, leaf(s))
				}
			}
			assert.True(t, found, "the record made from the callback is in the profile")
		})
	}
}

func TestProfileLabels(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 2)
	ctx := track.WithLabels(context.Background(), "request", "r9", "kind", "user-kind", "model", "m")
	ms, err := buildMasks(ctx, prog.alloc, 1)
	prog.live = append(prog.live, ms...)
	require.NoError(t, err)
	p := buildProfile(t, prog.snapshot())

	var live []*profile.Sample
	for _, s := range p.Sample {
		if s.Value[inuseObjects] == 0 {
			assert.Empty(t, s.Label, "alloc samples carry no labels: allocations are counted per site")
			assert.Empty(t, s.NumLabel)
			continue
		}
		live = append(live, s)
	}
	require.Len(t, live, 2)
	byRequest := map[string]*profile.Sample{}
	for _, s := range live {
		require.Len(t, s.Label["request"], 1)
		byRequest[s.Label["request"][0]] = s
	}
	r1 := byRequest["r1"]
	require.NotNil(t, r1)
	assert.Equal(t, map[string][]string{
		"dtype": {"bool"}, "device": {"host"}, "kind": {"tensor"}, "shape": {"[64 64]"}, "request": {"r1"},
	}, r1.Label)
	assert.Equal(t, map[string][]int64{"bytes": {maskBytes}}, r1.NumLabel)
	assert.Equal(t, map[string][]string{"bytes": {"bytes"}}, r1.NumUnit)
	assert.Equal(t, [4]int64{0, 0, 2, 2 * maskBytes}, [4]int64(r1.Value))

	r9 := byRequest["r9"]
	require.NotNil(t, r9)
	assert.Equal(t, []string{"tensor"}, r9.Label["kind"], "the tensor's own kind wins")
	assert.Equal(t, []string{"user-kind"}, r9.Label[pprofexport.LabelPrefix+"kind"], "a colliding request label is renamed, not lost")
	assert.Equal(t, []string{"m"}, r9.Label["model"])
}

func TestProfileFilters(t *testing.T) {
	clk := newFakeClock()
	prog := newProgram(t, track.ReclaimLeaks(false), track.Clock(clk.Now))
	prog.masks("old", 2)
	clk.advance(60 * time.Millisecond) // age the old masks past MinAge below
	prog.masks("new", 1)
	prog.kv("new", 1)

	// A leak is what package tensor reports from a cleanup; report one by
	// hand on a record of our own.
	leaked := &track.Record{Bytes: 512, Meta: track.InternMeta("mask", "host", "bool", []int{512})}
	require.NoError(t, prog.tracker.Books().Record(context.Background(), leaked, 0))
	t.Cleanup(func() { require.NoError(t, leaked.Release()) })
	leaked.ReportDropped(nil, "")

	inuse := func(p *profile.Profile) map[string]int64 {
		out := map[string]int64{}
		for _, s := range p.Sample {
			if s.Value[inuseObjects] != 0 {
				out[s.Label["kind"][0]+"/"+strings.Join(s.Label["request"], "")] += s.Value[inuseObjects]
			}
		}
		return out
	}
	tests := []struct {
		name   string
		filter track.Filter
		want   map[string]int64
	}{
		{"all", track.Filter{}, map[string]int64{"tensor/old": 2, "tensor/new": 1, "kv-cache/new": 1, "mask/": 1}},
		{"min age keeps the long-lived", track.Filter{MinAge: 30 * time.Millisecond}, map[string]int64{"tensor/old": 2}},
		{"one kind", track.Filter{Kind: "kv-cache"}, map[string]int64{"kv-cache/new": 1}},
		{"leaked only", track.Filter{LeakedOnly: true}, map[string]int64{"mask/": 1}},
		{"labels", track.Filter{Labels: map[string]string{"request": "new"}}, map[string]int64{"tensor/new": 1, "kv-cache/new": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := prog.tracker.SnapshotOf(tt.filter)
			require.NoError(t, err)
			p := buildProfile(t, snap)
			assert.Equal(t, tt.want, inuse(p))
			if tt.filter.LeakedOnly {
				for _, s := range p.Sample {
					if s.Value[inuseObjects] != 0 {
						assert.Equal(t, []string{"true"}, s.Label[pprofexport.LabelLeaked], "-tagfocus leaked=true matches")
						assert.NotContains(t, s.NumLabel, pprofexport.LabelLeaked)
					}
				}
			}
			if tt.filter.Kind != "" {
				assert.Contains(t, strings.Join(p.Comments, "\n"), "kind="+tt.filter.Kind, "the filter is recorded in the profile")
			}
		})
	}
}

func TestProfileEmptySnapshot(t *testing.T) {
	prog := newProgram(t)
	p := buildProfile(t, prog.snapshot())
	assert.Empty(t, p.Sample)

	var buf bytes.Buffer
	require.NoError(t, pprofexport.Write(&buf, prog.snapshot()))
	back, err := profile.Parse(&buf)
	require.NoError(t, err)
	assert.Empty(t, back.Sample)
	assert.Len(t, back.SampleType, 4)
}

func TestProfileOverflowSiteIsVisible(t *testing.T) {
	prog := newProgram(t, track.MaxSites(1))
	prog.masks("r1", 1) // the one site the table keeps
	prog.kv("r2", 2)    // no room: attributed to the overflow site
	got := byLeaf(buildProfile(t, prog.snapshot()))
	assert.Equal(t, int64(2*kvBytes), got[format.OverflowFunction][inuseSpace], "%v", got)
	assert.Equal(t, int64(maskBytes), got[fnMasks][inuseSpace])
}

func TestDiffProfile(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	old := prog.snapshot()
	prog.masks("r4", 4)
	for _, kv := range prog.live[3:5] {
		require.NoError(t, kv.Free())
	}
	prog.live = append(prog.live[:3], prog.live[5:]...)
	now := prog.snapshot()

	p, err := pprofexport.DiffProfile(old, now)
	require.NoError(t, err)
	require.NoError(t, p.CheckValid())
	got := byLeaf(p)
	assert.Equal(t, [4]int64{4, 4 * maskBytes, 4, 4 * maskBytes}, got[fnMasks], "the masks grew")
	assert.Equal(t, [4]int64{0, 0, -2, -2 * kvBytes}, got[fnKV], "the KV blocks shrank")
	assert.Equal(t, now.Time.Sub(old.Time).Nanoseconds(), p.DurationNanos)

	var buf bytes.Buffer
	require.NoError(t, pprofexport.WriteDiff(&buf, old, now))
	back, err := profile.Parse(&buf)
	require.NoError(t, err)
	assert.Equal(t, got, byLeaf(back))
}

func TestDeltaProfile(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r0", 2)
	start := prog.snapshot()
	prog.churn("r2", 2)
	prog.kv("r3", 1)
	for _, kv := range prog.live[3:5] { // the two KV blocks made before the window
		require.NoError(t, kv.Free())
	}
	prog.live = append(prog.live[:3], prog.live[5:]...)
	end := prog.snapshot()

	p, err := pprofexport.DeltaProfile(start, end)
	require.NoError(t, err)
	require.NoError(t, p.CheckValid())
	got := byLeaf(p)
	assert.Equal(t, [4]int64{2, 2 * maskBytes, 0, 0}, got[fnMasks],
		"two masks allocated in the window and freed in it; the three live before it did not change")
	assert.Equal(t, [4]int64{1, kvBytes, -1, -kvBytes}, got[fnKV], "one KV block made, two freed: one fewer live")
	assert.Equal(t, start.Time.UnixNano(), p.TimeNanos, "a delta is stamped with its window's start")
	assert.Equal(t, end.Time.Sub(start.Time).Nanoseconds(), p.DurationNanos)
}

// A delta profile is additive, as continuous profilers store it: the deltas
// of consecutive windows add up to the change of the live set over all of
// them, per sample type, per site and per label, while a plain profile is
// the live set itself. Parca adds every sample type of a delta profile;
// with in-use values that were the live set at each window's end, five
// windows added up to five live sets.
func TestDeltaWindowsAddUpToTheChangeOfTheLiveSet(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r0", 3)
	prog.kv("r0", 2)
	first := prog.snapshot()
	firstLive := buildProfile(t, first)

	sum := map[string][4]int64{}        // by leaf and label, over the windows
	addUp := func(p *profile.Profile) { // as a scraper adds deltas
		for _, s := range p.Sample {
			k := leaf(s) + " " + strings.Join(s.Label["request"], "")
			v := sum[k]
			for i := range v {
				v[i] += s.Value[i]
			}
			sum[k] = v
		}
	}
	start := first
	for w := range 5 {
		request := fmt.Sprintf("r%d", w+1)
		prog.masks(request, w+1)                               // the leak: more masks each window
		prog.churn(request, 2)                                 // in flight, freed within the window
		prog.kv(request, 1)                                    // a KV block per window...
		require.NoError(t, prog.live[len(prog.live)-1].Free()) // ...freed at once
		prog.live = prog.live[:len(prog.live)-1]
		if w == 2 { // a window in which older tensors go
			require.NoError(t, prog.live[3].Free()) // a KV block of r0
			prog.live = append(prog.live[:3], prog.live[4:]...)
		}
		end := prog.snapshot()
		p, err := pprofexport.DeltaProfile(start, end)
		require.NoError(t, err)
		require.NoError(t, p.CheckValid())
		addUp(p)
		start = end
	}
	last := prog.snapshot()
	lastLive := buildProfile(t, last)

	// The plain profile is the live set: in-use values add up to it.
	liveBytes := func(snap *track.Snapshot) (n, bytes int64) {
		for _, st := range snap.Sites {
			n, bytes = n+st.LiveCount, bytes+st.LiveBytes
		}
		return n, bytes
	}
	n, bytes := liveBytes(last)
	assert.Equal(t, [2]int64{n, bytes}, [2]int64{totals(lastLive)[inuseObjects], totals(lastLive)[inuseSpace]},
		"a plain profile's in-use values are the live set")
	assert.Equal(t, [2]int64{3 + 15, 18 * maskBytes}, [2]int64{n - 1, bytes - kvBytes}, "18 masks and one KV block live")

	// The deltas add up to the change, and allocations to those made.
	var total [4]int64
	for _, v := range sum {
		for i := range total {
			total[i] += v[i]
		}
	}
	assert.Equal(t, [4]int64{
		totals(lastLive)[allocObjects] - totals(firstLive)[allocObjects],
		totals(lastLive)[allocSpace] - totals(firstLive)[allocSpace],
		totals(lastLive)[inuseObjects] - totals(firstLive)[inuseObjects],
		totals(lastLive)[inuseSpace] - totals(firstLive)[inuseSpace],
	}, total, "five windows added up are the change from the first window's start to the last one's end")
	assert.Equal(t, [4]int64{0, 0, 15 - 1, 15*maskBytes - kvBytes}, [4]int64{
		0, 0, total[inuseObjects], total[inuseSpace]}, "15 masks more, one KV block less")
	for w := 1; w <= 5; w++ {
		k := fmt.Sprintf("%s r%d", fnMasks, w)
		assert.Equal(t, int64(w), sum[k][inuseObjects], "the masks of request r%d, by label", w)
	}
	assert.Equal(t, int64(-1), sum[fnKV+" r0"][inuseObjects], "the KV block of r0 that went")
}

func TestProfileErrors(t *testing.T) {
	prog := newProgram(t)
	snap := prog.snapshot()
	later := *snap
	later.Time = snap.Time.Add(time.Second)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"nil snapshot", func() error { _, err := pprofexport.Profile(nil); return err }(), pprofexport.ErrNilSnapshot},
		{"nil option", func() error { _, err := pprofexport.Profile(snap, nil); return err }(), pprofexport.ErrInvalidOption},
		{"nil diff option", func() error { _, err := pprofexport.DiffProfile(snap, snap, nil); return err }(), pprofexport.ErrInvalidOption},
		{"diff of nil", func() error { _, err := pprofexport.DiffProfile(snap, nil); return err }(), pprofexport.ErrNilSnapshot},
		{"diff newest first", func() error { _, err := pprofexport.DiffProfile(&later, snap); return err }(), pprofexport.ErrSnapshotOrder},
		{"delta newest first", func() error { _, err := pprofexport.DeltaProfile(&later, snap); return err }(), pprofexport.ErrSnapshotOrder},
		{"delta of nil", func() error { _, err := pprofexport.DeltaProfile(nil, snap); return err }(), pprofexport.ErrNilSnapshot},
		{"text of nil", pprofexport.WriteText(&bytes.Buffer{}, nil), pprofexport.ErrNilSnapshot},
		{"file of nil", pprofexport.WriteFile(t.TempDir()+"/x.pb.gz", nil), pprofexport.ErrNilSnapshot},
		{"empty path", pprofexport.WriteFile("", snap), pprofexport.ErrEmptyPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Error(t, tt.err)
			assert.ErrorIs(t, tt.err, tt.want)
		})
	}
	t.Run("writer failure", func(t *testing.T) {
		err := pprofexport.Write(failingWriter{}, snap)
		assert.ErrorIs(t, err, errDiskFull)
	})
}

var errDiskFull = errors.New("disk full")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// A filtered delta subtracts cumulative alloc figures per site on both
// sides: a site that leaves the filter in the window counts no allocation,
// and one that enters it counts only the window's allocations. In-use values
// are the change of what the filter selects: the site that left it shrinks.
func TestFilteredDeltaAllocValues(t *testing.T) {
	prog := newProgram(t)
	f := track.Filter{Kind: "tensor"}                            // the masks' kind: tensor.DefaultKind
	prog.masks("r0", 3)                                          // site A allocates before the window...
	prog.freeAll()                                               // ...and has nothing live when it starts
	held, err := buildMasks(context.Background(), prog.alloc, 2) // site B, live at the start
	require.NoError(t, err)
	start, err := prog.tracker.SnapshotOf(f)
	require.NoError(t, err)
	for _, m := range held { // B leaves the filter in the window
		require.NoError(t, m.Free())
	}
	prog.masks("r2", 1) // A enters it with the window's one allocation
	end, err := prog.tracker.SnapshotOf(f)
	require.NoError(t, err)

	p, err := pprofexport.DeltaProfile(start, end)
	require.NoError(t, err)
	for _, s := range p.Sample {
		assert.GreaterOrEqual(t, s.Value[allocObjects], int64(0), "no negative allocations in a delta")
		assert.GreaterOrEqual(t, s.Value[allocSpace], int64(0), "no negative allocations in a delta")
	}
	assert.Equal(t, [4]int64{1, 4096, -1, -4096}, totals(p),
		"one allocation in the window; one mask live at its end where two were at its start")
}

// A delta of two snapshots taken with different filters is refused: the
// change from what one selected to what the other did is no change over
// the window.
func TestDeltaOfTwoFiltersIsRefused(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 1)
	counters := prog.tracker.SiteSnapshot()
	start, err := prog.tracker.SnapshotOf(track.Filter{Kind: "tensor"})
	require.NoError(t, err)
	end := prog.snapshot()
	_, err = pprofexport.DeltaProfile(start, end)
	assert.ErrorIs(t, err, pprofexport.ErrFilterMismatch)
	assert.Contains(t, err.Error(), `"kind=tensor"`)
	_, err = pprofexport.DeltaProfile(counters, end)
	assert.NoError(t, err, "a site snapshot is unfiltered, as the end is")
	end, err = prog.tracker.SnapshotOf(track.Filter{Labels: map[string]string{"request": "r1"}})
	require.NoError(t, err)
	_, err = pprofexport.DeltaProfile(counters, end)
	assert.ErrorIs(t, err, pprofexport.ErrFilterMismatch)
}

// A delta that starts from counters alone (Tracker.SiteSnapshot, no walk of
// the live set) has no groups to subtract: its in-use differences are per
// site, without labels, and still add up to the change.
func TestDeltaFromASiteSnapshot(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r1", 2)
	start := prog.tracker.SiteSnapshot()
	prog.masks("r2", 2)
	require.NoError(t, prog.live[3].Free())
	prog.live = append(prog.live[:3], prog.live[4:]...)
	end := prog.snapshot()

	p, err := pprofexport.DeltaProfile(start, end)
	require.NoError(t, err)
	require.NoError(t, p.CheckValid())
	got := byLeaf(p)
	assert.Equal(t, [4]int64{2, 2 * maskBytes, 2, 2 * maskBytes}, got[fnMasks])
	assert.Equal(t, [4]int64{0, 0, -1, -kvBytes}, got[fnKV])
	for _, s := range p.Sample {
		assert.Empty(t, s.Label, "per-site samples carry no labels")
	}
}

// Request labels never meet the tensors' own labels, nor each other, under
// one name: "bytes" and "label_bytes" stay two labels.
func TestProfileLabelNamespaces(t *testing.T) {
	prog := newProgram(t)
	ctx := track.WithLabels(context.Background(), "bytes", "b", "label_bytes", "lb", "label_x", "lx",
		"leaked", "no", "request", "r1")
	ms, err := buildMasks(ctx, prog.alloc, 1)
	prog.live = append(prog.live, ms...)
	require.NoError(t, err)

	p := buildProfile(t, prog.snapshot())
	var live *profile.Sample
	for _, s := range p.Sample {
		if s.Value[inuseObjects] != 0 {
			live = s
		}
	}
	require.NotNil(t, live)
	assert.Equal(t, map[string][]string{
		"dtype": {"bool"}, "device": {"host"}, "kind": {"tensor"}, "shape": {"[64 64]"}, "request": {"r1"},
		"label_bytes": {"b"}, "label_label_bytes": {"lb"}, "label_label_x": {"lx"}, "label_leaked": {"no"},
	}, live.Label)
	assert.Equal(t, map[string][]int64{"bytes": {maskBytes}}, live.NumLabel)
}

// The writers keep every request label unless LabelKeys lists some.
func TestProfileLabelKeys(t *testing.T) {
	prog := newProgram(t)
	ctx := track.WithLabels(context.Background(), "request", "r1", "model", "m1")
	ms, err := buildMasks(ctx, prog.alloc, 1)
	prog.live = append(prog.live, ms...)
	require.NoError(t, err)
	ms, err = buildMasks(track.WithLabels(ctx, "request", "r2"), prog.alloc, 2)
	prog.live = append(prog.live, ms...)
	require.NoError(t, err)

	requestAndModel := func(p *profile.Profile) map[string]int64 {
		out := map[string]int64{}
		for _, s := range p.Sample {
			if s.Value[inuseObjects] != 0 {
				out[strings.Join(s.Label["request"], "")+"/"+strings.Join(s.Label["model"], "")] += s.Value[inuseObjects]
			}
		}
		return out
	}
	assert.Equal(t, map[string]int64{"r1/m1": 1, "r2/m1": 2}, requestAndModel(buildProfile(t, prog.snapshot())))
	assert.Equal(t, map[string]int64{"/m1": 3}, requestAndModel(buildProfile(t, prog.snapshot(), pprofexport.LabelKeys("model"))),
		"samples that differed only by a label left out add up")
	assert.Equal(t, map[string]int64{"/": 3}, requestAndModel(buildProfile(t, prog.snapshot(), pprofexport.LabelKeys())))

	_, err = pprofexport.Profile(prog.snapshot(), pprofexport.LabelKeys(""))
	assert.ErrorIs(t, err, pprofexport.ErrInvalidOption)
	_, err = pprofexport.DiffProfile(prog.snapshot(), prog.snapshot(), pprofexport.LabelKeys(make([]string, 65)...))
	assert.ErrorIs(t, err, pprofexport.ErrInvalidOption)
}

// Tensors the garbage collector found without Free carry the string label
// leaked=true, so -tagfocus leaked=true selects exactly them, also when
// only some tensors of a group leaked.
func TestProfileLeakedLabel(t *testing.T) {
	prog := newProgram(t, track.ReclaimLeaks(false))
	recs := make([]track.Record, 3)
	for i := range recs {
		recs[i] = track.Record{Bytes: 512, Meta: track.InternMeta("mask", "host", "bool", []int{512})}
		require.NoError(t, prog.tracker.Books().Record(context.Background(), &recs[i], 0))
	}
	t.Cleanup(func() {
		for i := range recs {
			require.NoError(t, (&recs[i]).Release())
		}
	})
	(&recs[0]).ReportDropped(nil, "")
	snap := prog.snapshot()
	require.Len(t, snap.Groups, 1, "one group, one of its three tensors leaked")

	p := buildProfile(t, snap)
	byLeaked := map[string][2]int64{}
	for _, s := range p.Sample {
		if s.Value[inuseObjects] != 0 {
			byLeaked[strings.Join(s.Label[pprofexport.LabelLeaked], "")] = [2]int64{s.Value[inuseObjects], s.Value[inuseSpace]}
			assert.NotContains(t, s.NumLabel, pprofexport.LabelLeaked)
		}
	}
	assert.Equal(t, map[string][2]int64{"true": {1, 512}, "": {2, 1024}}, byLeaked)

	path := filepath.Join(t.TempDir(), "leaked.pb.gz")
	require.NoError(t, pprofexport.WriteFile(path, snap))
	out, err := runPprof(t, "-top", "-sample_index=inuse_objects", "-tagfocus", "leaked=true", path)
	require.NoError(t, err)
	assert.Contains(t, out, "Showing nodes accounting for 1, ", out)
}

func TestWritersRefuseANilWriter(t *testing.T) {
	prog := newProgram(t)
	snap := prog.snapshot()
	assert.ErrorIs(t, pprofexport.Write(nil, snap), pprofexport.ErrNilWriter)
	assert.ErrorIs(t, pprofexport.WriteDiff(nil, snap, snap), pprofexport.ErrNilWriter)
	assert.ErrorIs(t, pprofexport.WriteText(nil, snap), pprofexport.ErrNilWriter)
}

func TestDiffOfTwoTrackersIsRefused(t *testing.T) {
	one := newProgram(t, track.Name("one"))
	two := newProgram(t, track.Name("two"))
	one.masks("r1", 1)
	before := one.snapshot()
	after := two.snapshot()

	_, err := pprofexport.DiffProfile(before, after)
	assert.ErrorIs(t, err, pprofexport.ErrTrackerMismatch)
	assert.Contains(t, err.Error(), `tracker "one" and tracker "two"`)
	_, err = pprofexport.DeltaProfile(before, after)
	assert.ErrorIs(t, err, pprofexport.ErrTrackerMismatch)
	assert.ErrorIs(t, pprofexport.WriteDiff(&bytes.Buffer{}, before, after), pprofexport.ErrTrackerMismatch)
}

// Two trackers of one name are still two trackers: their sites do not match.
func TestDiffOfTwoTrackersOfOneNameIsRefused(t *testing.T) {
	one := newProgram(t, track.Name("same"))
	two := newProgram(t, track.Name("same"))
	_, err := pprofexport.DiffProfile(one.snapshot(), two.snapshot())
	assert.ErrorIs(t, err, pprofexport.ErrTrackerMismatch)
}
