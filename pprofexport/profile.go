package pprofexport

import (
	"fmt"
	"iter"
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

// Profile builds the pprof profile of snap, a gauge: its in-use values are
// the live set at snap.Time, and its alloc values the allocations made
// since the tracker started. Each group of live tensors (snap.Groups) is a
// sample carrying inuse_objects and inuse_space, the group's labels (its
// request labels as LabelKeys allows, all by default) and the size of its
// tensors; a group some of whose tensors leaked is two samples. Each call
// site (snap.Sites) is a sample carrying alloc_objects and alloc_space.
// The tracker counts allocations per site only, so alloc samples have no
// labels: -tagfocus selects live tensors, and with
// -sample_index=alloc_space it selects nothing. With a filtered snapshot,
// alloc values still count every allocation of each site the filter kept.
//
// Stacks are symbolized with functions, files, lines and inlined calls, so
// go tool pprof needs no binary. An empty snapshot gives a valid profile with
// no samples. Samples with the same labels share their label maps, and
// samples of one site their locations: copy before changing one sample's.
// Profile is safe to call concurrently, also on one snapshot.
func Profile(snap *track.Snapshot, opts ...ProfileOption) (*profile.Profile, error) {
	cfg, err := newProfileConfig(opts)
	if err != nil {
		return nil, err
	}
	if snap == nil {
		return nil, ErrNilSnapshot
	}
	if snap, err = cfg.narrow(snap); err != nil {
		return nil, err
	}
	return build(snap, cfg, allocSites(snap), false), nil
}

// allocSites returns the sites whose alloc values a profile of snap shows:
// every site, or with a filter only the sites with selected live tensors.
func allocSites(snap *track.Snapshot) func(*track.SiteStats) bool {
	if !snap.Filter.Active() {
		return func(*track.SiteStats) bool { return true }
	}
	return func(s *track.SiteStats) bool { return s.LiveCount > 0 }
}

// build makes the profile of snap: in-use samples per group, alloc samples
// per site withAlloc keeps. With perSite, in-use values come from the
// sites' live figures instead, one unlabeled sample per site: what a delta
// can subtract when one of its snapshots holds counters alone.
func build(snap *track.Snapshot, cfg config, withAlloc func(*track.SiteStats) bool, perSite bool) *profile.Profile {
	p := newProfile()
	if !snap.Time.IsZero() {
		p.TimeNanos = snap.Time.UnixNano()
	}
	p.Comments = comments(snap)
	st := newStacks(p, cfg.keepLibrary)
	lb := newLabeler(&cfg)

	// Samples and their values are carved from two blocks: a profile of
	// many sites costs a few allocations more, not three per sample.
	n := countSamples(snap, perSite)
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
	eachSample(snap, groupsOf(snap), withAlloc, perSite, func(g *track.Group, leaked bool, v [numValues]int64) {
		l := lb.labels(g, leaked)
		add(profile.Sample{Location: st.site(g.Site), Label: l.label, NumLabel: l.num, NumUnit: l.unit}, v)
	}, func(site *track.Site, v [numValues]int64) {
		add(profile.Sample{Location: st.site(site)}, v)
	})
	return p
}

// countSamples returns how many samples eachSample makes of snap.
func countSamples(snap *track.Snapshot, perSite bool) int {
	if perSite {
		return len(snap.Sites)
	}
	n := len(snap.Groups) + len(snap.Sites)
	for i := range snap.Groups {
		if g := &snap.Groups[i]; g.Leaked > 0 && g.Leaked < g.Count {
			n++
		}
	}
	return n
}

// groupsOf yields the groups of snap.
func groupsOf(snap *track.Snapshot) iter.Seq[*track.Group] {
	return func(yield func(*track.Group) bool) {
		for i := range snap.Groups {
			if !yield(&snap.Groups[i]) {
				return
			}
		}
	}
}

// eachSample calls live with each in-use sample of a profile of snap, its
// groups read from groups (snap.Groups, or track.Groups taken apart), and
// site with each per-site one, in the order a profile lists them: the one
// reading of a snapshot that build and the streaming encoders share. A
// group whose tensors the garbage collector found leaked in part is two
// samples, so that -tagfocus leaked=true selects exactly those. Sites
// carry the alloc values withAlloc keeps and, with perSite, the in-use
// values in place of the groups', which are not read; a site with no
// value is left out.
func eachSample(snap *track.Snapshot, groups iter.Seq[*track.Group], withAlloc func(*track.SiteStats) bool,
	perSite bool, live func(g *track.Group, leaked bool, v [numValues]int64), site func(s *track.Site, v [numValues]int64)) {
	if perSite {
		groups = func(func(*track.Group) bool) {}
	}
	for g := range groups {
		if g.Count == 0 && g.Bytes == 0 {
			continue
		}
		leaked := min(max(g.Leaked, 0), g.Count)
		var leakedBytes int64
		switch {
		case leaked == g.Count:
			leakedBytes = g.Bytes
		case leaked > 0:
			// The tensors of a group share dtype and shape, so each has
			// the group's mean size.
			leakedBytes = g.Bytes / g.Count * leaked
		}
		if leaked > 0 {
			live(g, true, [numValues]int64{inuseObjects: leaked, inuseSpace: leakedBytes})
		}
		if g.Count > leaked || g.Bytes != leakedBytes {
			live(g, false, [numValues]int64{inuseObjects: g.Count - leaked, inuseSpace: g.Bytes - leakedBytes})
		}
	}
	for i := range snap.Sites {
		st := &snap.Sites[i]
		var v [numValues]int64
		if withAlloc(st) {
			v[allocObjects], v[allocSpace] = st.AllocCount, st.AllocBytes
		}
		if perSite {
			v[inuseObjects], v[inuseSpace] = st.LiveCount, st.LiveBytes
		}
		if v != ([numValues]int64{}) {
			site(st.Site, v)
		}
	}
}

// comments describe where a profile came from; go tool pprof -comments
// prints them.
func comments(snap *track.Snapshot) []string {
	c := []string{fmt.Sprintf("tensorlife: live tensors of tracker %q", snap.TrackerName)}
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
	if f.Outlived {
		parts = append(parts, "outlived=1")
	}
	if f.InFlight {
		parts = append(parts, "open=1")
	}
	if f.Kind != "" {
		parts = append(parts, "kind="+f.Kind)
	}
	if f.Device != "" {
		parts = append(parts, "device="+f.Device)
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

// DiffProfile returns a profile of what changed from before to after, two
// snapshots of one tracker with before taken first: every value is after's
// minus before's for the same stack and labels, so go tool pprof -top lists
// what grew with positive values and what shrank with negative ones. It is
// what go tool pprof -diff_base=before.pb.gz after.pb.gz shows, in one
// file.
//
// Snapshots taken with different filters compare what each selected; take
// both with the same filter. Snapshots passed newest first return an error
// matching ErrSnapshotOrder, snapshots of two trackers one matching
// ErrTrackerMismatch.
func DiffProfile(before, after *track.Snapshot, opts ...DiffOption) (*profile.Profile, error) {
	cfg, err := newDiffConfig(opts)
	if err != nil {
		return nil, err
	}
	return combine(before, after, "diff", cfg)
}

// DeltaProfile returns the profile of a window of time, the one the
// handler's ?seconds=N serves. Every value is a difference over the
// window, end's minus start's for the same stack and labels, as in
// net/http/pprof's delta profiles: alloc values are the allocations made
// during the window, in-use values the change of the live set, negative
// where it shrank. A delta profile is additive: the deltas of consecutive
// windows add up to the change over all of them, which is how a continuous
// profiler reads it (Parca stores every sample type of a delta profile as
// additive). The live set itself is Profile's, a gauge.
//
// Take both snapshots with the same filter (Tracker.SnapshotOf); snapshots
// taken with different filters return an error matching ErrFilterMismatch,
// since the difference would mix what each selected. The start may also be
// a Tracker.SiteSnapshot, counters alone, taken without a walk of the live
// set; it has no groups to subtract, so the in-use differences are then one
// sample per site with no labels, and the end must be unfiltered.
//
// Snapshots passed newest first return an error matching ErrSnapshotOrder,
// snapshots of two trackers one matching ErrTrackerMismatch.
func DeltaProfile(start, end *track.Snapshot, opts ...DiffOption) (*profile.Profile, error) {
	cfg, err := newDiffConfig(opts)
	if err != nil {
		return nil, err
	}
	if start != nil && end != nil && !sameFilter(start.Filter, end.Filter) {
		return nil, fmt.Errorf("%w: delta from a snapshot filtered %q to one filtered %q", ErrFilterMismatch,
			describeFilter(start.Filter), describeFilter(end.Filter))
	}
	return combine(start, end, "delta", cfg)
}

// sameFilter reports whether a and b select the same allocations.
func sameFilter(a, b track.Filter) bool {
	return a.Request == b.Request && describeFilter(a) == describeFilter(b)
}

// countersOnly reports whether snap holds per-site counters and no groups
// although some of its tensors are live: a Tracker.SiteSnapshot.
func countersOnly(snap *track.Snapshot) bool {
	if len(snap.Groups) > 0 {
		return false
	}
	for i := range snap.Sites {
		if snap.Sites[i].LiveCount != 0 || snap.Sites[i].LiveBytes != 0 {
			return true
		}
	}
	return false
}

// combine subtracts before from after, which is how pprof computes
// -diff_base: every value of before is negated, samples with the same
// stack and labels add up, and samples that cancel out are dropped.
func combine(before, after *track.Snapshot, what string, cfg config) (*profile.Profile, error) {
	if err := checkPair(before, after, what); err != nil {
		return nil, err
	}
	withAlloc, perSite := pairSamples(before, after)
	base, top := build(before, cfg, withAlloc, perSite), build(after, cfg, withAlloc, perSite)
	for _, s := range base.Sample {
		for i := range s.Value {
			s.Value[i] = -s.Value[i]
		}
	}
	p, err := profile.Merge([]*profile.Profile{base, top})
	if err != nil {
		// Both profiles come from build, so their types always agree.
		return nil, fmt.Errorf("pprofexport: merge %s: %w", what, err)
	}
	// As net/http/pprof writes a delta: the window's start and its length.
	p.TimeNanos = base.TimeNanos
	p.DurationNanos = after.Time.Sub(before.Time).Nanoseconds()
	p.Comments = pairComments(before, after, what)
	return p, nil
}

// checkPair refuses two snapshots a diff or delta cannot be made of.
func checkPair(before, after *track.Snapshot, what string) error {
	if before == nil || after == nil {
		return ErrNilSnapshot
	}
	if before.Tracker == nil || before.Tracker != after.Tracker {
		return fmt.Errorf("%w: %s of tracker %q and tracker %q", ErrTrackerMismatch, what, before.TrackerName, after.TrackerName)
	}
	if after.Time.Before(before.Time) {
		return fmt.Errorf("%w: %s from %s back to %s", ErrSnapshotOrder, what,
			before.Time.Format(time.RFC3339Nano), after.Time.Format(time.RFC3339Nano))
	}
	return nil
}

// pairSamples says which samples both sides of a diff or delta carry.
// Alloc values are cumulative per site: they are subtracted for one set
// of sites, the newer snapshot's, on both sides; every snapshot lists
// every site that allocated, so the older one has what to subtract. A
// snapshot of counters alone has no groups: then live figures are
// compared per site on both sides (perSite), or its live set would not be
// subtracted.
func pairSamples(before, after *track.Snapshot) (withAlloc func(*track.SiteStats) bool, perSite bool) {
	keep := map[*track.Site]bool{}
	inAfter := allocSites(after)
	for i := range after.Sites {
		if inAfter(&after.Sites[i]) {
			keep[after.Sites[i].Site] = true
		}
	}
	return func(s *track.SiteStats) bool { return keep[s.Site] }, countersOnly(before) || countersOnly(after)
}

// pairComments are a diff's or delta's comments.
func pairComments(before, after *track.Snapshot, what string) []string {
	return append(comments(after), fmt.Sprintf("tensorlife: %s over %v from %s: every value is the change, end minus start",
		what, after.Time.Sub(before.Time), before.Time.Format(time.RFC3339Nano)))
}
