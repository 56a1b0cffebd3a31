package pprofexport

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"github.com/tensorlife/tensorlife/track"
)

// The sample values of every profile this package writes, in order, as in a
// Go heap profile.
const (
	allocObjects = iota // alloc_objects/count
	allocSpace          // alloc_space/bytes
	inuseObjects        // inuse_objects/count
	inuseSpace          // inuse_space/bytes
	numValues
)

// docURL is shown by pprof's web interface as the profile's documentation.
const docURL = "https://pkg.go.dev/github.com/tensorlife/tensorlife/pprofexport"

// newProfile returns an empty profile with the heap-profile sample types.
func newProfile() *profile.Profile {
	return &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "alloc_objects", Unit: "count"},
			{Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"},
			{Type: "inuse_space", Unit: "bytes"},
		},
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		// Every allocation is recorded; nothing is sampled.
		Period: 1,
		DocURL: docURL,
	}
}

// Profile builds the pprof profile of snap: one sample per group of live
// tensors (snap.Groups) carrying inuse_objects and inuse_space, the group's
// labels and the size of its tensors, and one sample per call site
// (snap.Sites) carrying alloc_objects and alloc_space, the allocations made
// there since the tracker started. The tracker counts allocations per site
// only, so alloc samples have no labels: -tagfocus selects live tensors, and
// -sample_index=alloc_space with -tagfocus shows nothing. With a filtered
// snapshot, alloc values still count every allocation of each site the
// filter kept.
//
// Stacks are symbolized with functions, files, lines and inlined calls, so
// go tool pprof needs no binary. An empty snapshot gives a valid profile with
// no samples. Samples with the same labels share their label maps, and
// samples of one site their locations: copy before changing one sample's.
// Profile is safe to call concurrently, also on one snapshot.
func Profile(snap *track.Snapshot, opts ...Option) (*profile.Profile, error) {
	cfg, err := newConfig(scopeProfile, opts)
	if err != nil {
		return nil, err
	}
	if snap == nil {
		return nil, ErrNilSnapshot
	}
	return build(snap, cfg, allocSites(snap)), nil
}

// allocSites returns the sites whose alloc values a profile of snap shows:
// every site, or with a filter only the sites with selected live tensors.
func allocSites(snap *track.Snapshot) func(*track.SiteStats) bool {
	if !snap.Filter.Active() {
		return func(*track.SiteStats) bool { return true }
	}
	return func(s *track.SiteStats) bool { return s.LiveCount > 0 }
}

func build(snap *track.Snapshot, cfg config, withAlloc func(*track.SiteStats) bool) *profile.Profile {
	p := newProfile()
	if !snap.Time.IsZero() {
		p.TimeNanos = snap.Time.UnixNano()
	}
	p.Comments = comments(snap)
	st := newStacks(p, cfg.keepLibrary)
	lb := newLabeler()

	// Samples and their values are carved from two blocks: a profile of
	// many sites costs a few allocations more, not three per sample.
	n := len(snap.Groups) + len(snap.Sites)
	samples := make([]profile.Sample, 0, n)
	values := make([]int64, numValues*n)
	p.Sample = make([]*profile.Sample, 0, n)
	add := func(s profile.Sample, v [numValues]int64) {
		s.Value = values[:numValues:numValues]
		values = values[numValues:]
		copy(s.Value, v[:])
		samples = append(samples, s)
		p.Sample = append(p.Sample, &samples[len(samples)-1])
	}
	for i := range snap.Groups {
		g := &snap.Groups[i]
		if g.Count == 0 && g.Bytes == 0 {
			continue
		}
		l := lb.labels(g)
		add(profile.Sample{Location: st.site(g.Site), Label: l.label, NumLabel: l.num, NumUnit: l.unit},
			[numValues]int64{inuseObjects: g.Count, inuseSpace: g.Bytes})
	}
	for i := range snap.Sites {
		site := &snap.Sites[i]
		if site.AllocCount == 0 && site.AllocBytes == 0 || !withAlloc(site) {
			continue
		}
		add(profile.Sample{Location: st.site(site.Site)},
			[numValues]int64{allocObjects: site.AllocCount, allocSpace: site.AllocBytes})
	}
	return p
}

// comments describe where a profile came from; go tool pprof -comments
// prints them.
func comments(snap *track.Snapshot) []string {
	c := []string{fmt.Sprintf("tensorlife: live tensors of tracker %q", snap.Tracker)}
	if f := describeFilter(snap.Filter); f != "" {
		c = append(c, "tensorlife: filter "+f)
	}
	return c
}

// describeFilter renders the parts of f that select tensors, as the
// handler's query parameters name them; empty if f selects everything.
func describeFilter(f track.Filter) string {
	var parts []string
	if f.MinAge > 0 {
		parts = append(parts, "min_age="+f.MinAge.String())
	}
	if f.Kind != "" {
		parts = append(parts, "kind="+f.Kind)
	}
	if f.LeakedOnly {
		parts = append(parts, "leaked=true")
	}
	if len(f.Labels) > 0 {
		parts = append(parts, "labels="+track.NewLabels(flatten(f.Labels)...).String())
	}
	return strings.Join(parts, " ")
}

func flatten(m map[string]string) []string {
	kv := make([]string, 0, 2*len(m))
	for k, v := range m {
		kv = append(kv, k, v)
	}
	return kv
}

// DiffProfile returns a profile of what changed from old to new, two
// snapshots of one tracker with old taken first: every value is new's minus
// old's for the same stack and labels, so go tool pprof -top lists what grew
// with positive values and what shrank with negative ones. It is what
// go tool pprof -diff_base=old.pb.gz new.pb.gz shows, in one file.
//
// Snapshots taken with different filters compare what each selected; take
// both with the same filter. Snapshots passed newest first return an error
// matching ErrSnapshotOrder.
func DiffProfile(old, new *track.Snapshot, opts ...Option) (*profile.Profile, error) {
	return combine(old, new, []int64{-1, -1, -1, -1}, "diff", opts)
}

// DeltaProfile returns the profile of a window of time, the one the
// handler's ?seconds=N serves: alloc values are what was allocated between
// start and end, in-use values are what was live at end. A continuous
// profiler that scrapes it every window sees allocation rates per site
// alongside the live set.
//
// Snapshots passed newest first return an error matching ErrSnapshotOrder.
func DeltaProfile(start, end *track.Snapshot, opts ...Option) (*profile.Profile, error) {
	return combine(start, end, []int64{-1, -1, 0, 0}, "delta", opts)
}

// combine merges new with old scaled by ratios (per sample value), which is
// how pprof computes -diff_base: samples with the same stack and labels add
// up, and samples that cancel out are dropped.
func combine(old, new *track.Snapshot, ratios []int64, what string, opts []Option) (*profile.Profile, error) {
	cfg, err := newConfig(scopeProfile, opts)
	if err != nil {
		return nil, err
	}
	if old == nil || new == nil {
		return nil, ErrNilSnapshot
	}
	if new.Time.Before(old.Time) {
		return nil, fmt.Errorf("%w: %s from %s back to %s", ErrSnapshotOrder, what,
			old.Time.Format(time.RFC3339Nano), new.Time.Format(time.RFC3339Nano))
	}
	// Alloc values are cumulative per site: subtract them for one set of
	// sites, the newer snapshot's, on both sides. Every snapshot lists every
	// site that allocated, so the older one has what to subtract.
	keep := map[*track.Site]bool{}
	inNew := allocSites(new)
	for i := range new.Sites {
		if inNew(&new.Sites[i]) {
			keep[new.Sites[i].Site] = true
		}
	}
	withAlloc := func(s *track.SiteStats) bool { return keep[s.Site] }
	base, top := build(old, cfg, withAlloc), build(new, cfg, withAlloc)
	for _, s := range base.Sample {
		for i, r := range ratios {
			s.Value[i] *= r
		}
	}
	p, err := profile.Merge([]*profile.Profile{base, top})
	if err != nil {
		// Both profiles come from build, so their types always agree.
		return nil, fmt.Errorf("pprofexport: merge %s: %w", what, err)
	}
	// As net/http/pprof writes a delta: the window's start and its length.
	p.TimeNanos = base.TimeNanos
	p.DurationNanos = new.Time.Sub(old.Time).Nanoseconds()
	p.Comments = append(comments(new), fmt.Sprintf("tensorlife: %s over %v from %s", what,
		new.Time.Sub(old.Time), old.Time.Format(time.RFC3339Nano)))
	return p, nil
}
