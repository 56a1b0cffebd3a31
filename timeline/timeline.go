package timeline

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// Timeline is live memory by call site over a window of a tracker's event
// history: sampled series for the top sites and the rest, the markers of
// notable events, and what the bounded history could not keep. Build or
// FromHistory makes one; WriteTrace and WriteSVG render it.
//
// A Timeline is immutable once built: its exported slices must not be
// modified, and it is safe to render from several goroutines at once.
type Timeline struct {
	// Title heads the picture and names the trace's process.
	Title string
	// Start is the tracker's start. Every time in a Timeline is nanoseconds
	// since Start, as in track.Event.
	Start time.Time
	// From and To bound the window. When the history kept every event since
	// Start, From is the first event's time (0 if there is none); after it
	// dropped events, From is the time after which it holds every event,
	// and the series before it cannot be rebuilt. To is the last event's
	// time (From if the window holds none): the window ends with the
	// workload, not when the timeline was built, so the picture shows no
	// stretch after it where nothing happened.
	From int64
	To   int64
	// Times are the sample instants, From first and To last.
	Times []int64
	// Series are live bytes at each sample: the top sites by Peak, largest
	// first, then "other" if any site is left out. Allocations are grouped
	// by the line that made them (track.Site.Location), so call stacks that
	// end on one line make one series; when the window holds more than one
	// device, by line and device, each series named "<line> @<device>".
	Series []Series
	// Total is the sum of the series at each sample.
	Total []int64
	// Peak is the most live bytes held at once in the window, from every
	// event, not only the samples.
	Peak int64
	// Markers are the window's events other than allocations and frees, in
	// time order: OOMs, leak suspects, GC-found leaks, double frees and
	// rebuilt masks.
	Markers []Marker
	// BudgetLine is the limit the picture draws as a line (the BudgetLine
	// option); 0 if none.
	BudgetLine int64
	// Reserved is what the allocator held at the window's end (the
	// Reserved option), drawn beside the tensor bytes; 0 if not given.
	Reserved int64
	// Quiet are the stretches of the window with no event at all, each
	// longer than a fiftieth of the window and than 20 times the median
	// time between events, at most 16 (the longest): on a real clock, where
	// the process recorded nothing (descheduled, waiting), which the
	// picture marks so that a flat band there does not read as a pause.
	Quiet []Stretch
	// Events is the number of history events in the window.
	Events int
	// Dropped counts events the bounded history overwrote before it was
	// read; Omitted counts kept events before From, left out because the
	// live bytes around them cannot be rebuilt.
	Dropped int64
	Omitted int
	// Capacity is the number of events the history keeps.
	Capacity int

	events    []track.Event // the window, for the trace
	groups    []group
	siteGroup []int32 // group index by slot (track.Site.ID and device); -1 unknown
	// devices are the window's devices in order of first event, when more
	// than one: then groups are per line and device. Few, so a linear scan
	// finds one (and equal strings share their bytes: track.Event.Device).
	devices []string
}

// slot is the siteGroup index of a site's allocations on device: the
// site's id alone when the window holds one device.
func (tl *Timeline) slot(id int, device string) int {
	n := len(tl.devices)
	if n == 0 {
		return id
	}
	return id*n + tl.deviceIndex(device)
}

// deviceIndex returns device's place in tl.devices; 0 for one not there
// (a site's live bytes before the window, which carry no device).
func (tl *Timeline) deviceIndex(device string) int {
	for i, d := range tl.devices {
		if d == device {
			return i
		}
	}
	return 0
}

// windowDevices returns the devices of win's allocations and frees in
// order of first event, or nil when there are fewer than two.
func windowDevices(win []track.Event) []string {
	var devices []string
	for i := range win {
		if !changesBytes(win[i].Kind) {
			continue
		}
		d := win[i].Device
		if !slices.Contains(devices, d) {
			devices = append(devices, d)
		}
	}
	if len(devices) < 2 {
		return nil
	}
	return devices
}

// Stretch is a span of a Timeline's window, in nanoseconds since Start.
type Stretch struct {
	From int64 // the last event before it
	To   int64 // the first event after it
}

// maxQuiet bounds Timeline.Quiet.
const maxQuiet = 16

// quietStretches returns the gaps between events that stand out (see
// Timeline.Quiet).
func quietStretches(win []track.Event, from, to int64) []Stretch {
	if len(win) < 3 || to <= from {
		return nil
	}
	gaps := make([]int64, 0, len(win)-1)
	for i := 1; i < len(win); i++ {
		gaps = append(gaps, win[i].Time-win[i-1].Time)
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	floor := max((to-from)/50, 20*sorted[len(sorted)/2], 1)
	var out []Stretch
	for i, g := range gaps {
		if g > floor {
			out = append(out, Stretch{From: win[i].Time, To: win[i+1].Time})
		}
	}
	if len(out) > maxQuiet {
		slices.SortFunc(out, func(a, b Stretch) int { return cmp.Compare(b.To-b.From, a.To-a.From) })
		out = out[:maxQuiet]
		slices.SortFunc(out, func(a, b Stretch) int { return cmp.Compare(a.From, b.From) })
	}
	return out
}

// Series is one band of the picture and one counter of the trace.
type Series struct {
	// Name is the legend's label: "function (file:line)" with the function
	// without its import path and the file without its directory; "other"
	// for the sum of the sites not shown on their own. Names are unique
	// within a Timeline.
	Name string
	// Device is the device of the series' allocations when the timeline
	// splits by device (Timeline.Series); empty otherwise and for "other".
	Device string
	// Function, File and Line locate the allocating line in full; empty for
	// "other".
	Function string
	File     string
	Line     int
	// Site is one call stack of the series (the first seen); nil for "other".
	Site *track.Site
	// Sites is the number of call stacks merged into the series; for
	// "other", the number of lines.
	Sites int
	// Values are the live bytes at each of Timeline.Times.
	Values []int64
	// Peak is the most live bytes the series held at once in the window.
	Peak int64
}

// Other reports whether s is the sum of the sites not shown on their own.
func (s Series) Other() bool { return s.Function == "" }

// Marker is a notable event: where the picture draws a mark and the trace a
// global instant.
type Marker struct {
	Kind  track.EventKind
	Time  int64 // nanoseconds since Timeline.Start
	Bytes int64 // the event's bytes: the request that failed, the suspect's growth
	// Site is where it happened; nil if unknown. Name is its label, as
	// Series.Name; empty if unknown.
	Site *track.Site
	Name string
}

// OtherName names the series that sums the sites not shown on their own.
const OtherName = "other"

// group is every allocation made at one line.
type group struct {
	name   string
	frame  track.Frame
	device string // when the timeline splits by device
	site   *track.Site
	sites  int
	pre    int64 // live bytes at From
	cur    int64
	peak   int64
}

// Build reads tr's event history and live site totals and builds the
// timeline of its window (see Timeline). It returns an error matching
// track.ErrHistoryOff unless tr was made with track.KeepHistory.
//
// When the history dropped events, the series are rebuilt backwards from
// the live bytes per site at the moment of the call. Build is exact when no
// allocation happens while it reads the tracker (a test, a program at
// exit); under concurrent allocation the history and the totals are read
// moments apart, and the series may be off by the allocations in between.
// It may be called from any goroutine; it does not stop the tracker.
//
// Without BudgetLine, the line drawn is the budget of the pools made with
// tr (they attach themselves to it, see track.Attach): their sum, as
// the picture sums every device; none if no pool of tr has a budget.
func Build(tr *track.Tracker, opts ...Option) (*Timeline, error) {
	if tr == nil {
		return nil, track.ErrNilTracker
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	log, err := tr.History()
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	var live []track.SiteStats
	if log.Dropped > 0 {
		live = tr.SiteTotals()
	}
	if cfg.title == "" {
		cfg.title = defaultTitle + " (tracker " + strconv.Quote(tr.Name()) + ")"
	}
	if cfg.budgetLine == 0 {
		cfg.budgetLine = budgetOf(tr)
	}
	return build(log, live, cfg), nil
}

const defaultTitle = "Live memory by site"

// FromHistory builds the timeline of a history read earlier (see Build), as
// track.Tracker.History returns it: events oldest first.
// live are the per-site live figures at the moment log was read
// (Tracker.SiteTotals or Snapshot.Sites); they are needed only when the
// history dropped events, and ignored otherwise.
func FromHistory(log *track.HistoryLog, live []track.SiteStats, opts ...Option) (*Timeline, error) {
	if log == nil {
		return nil, ErrNilHistory
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if log.Dropped > 0 && live == nil {
		return nil, fmt.Errorf("%w: %d events dropped", ErrLiveNeeded, log.Dropped)
	}
	if cfg.title == "" {
		cfg.title = defaultTitle
	}
	return build(log, live, cfg), nil
}

func changesBytes(k track.EventKind) bool { return k == track.EventAlloc || k == track.EventFree }

// delta is what e does to its site's live bytes.
func delta(e *track.Event) int64 {
	switch e.Kind {
	case track.EventAlloc:
		return e.Bytes
	case track.EventFree:
		return -e.Bytes
	}
	return 0
}

func build(log *track.HistoryLog, live []track.SiteStats, cfg config) *Timeline {
	after := completeAfter(log)
	first := firstAfter(log.Events, after)
	win := log.Events[first:]
	tl := &Timeline{
		Title: cfg.title, Start: log.Start, From: max(after, 0), BudgetLine: cfg.budgetLine, Reserved: cfg.reserved,
		Events: len(win), Dropped: log.Dropped, Omitted: first, Capacity: log.Capacity, events: win,
	}
	if after < 0 && len(win) > 0 {
		// Nothing was live before the first event: the picture starts there
		// rather than at a stretch of nothing since the tracker was made.
		tl.From = win[0].Time
	}
	tl.To = tl.From
	if n := len(win); n > 0 {
		tl.To = max(tl.To, win[n-1].Time)
	}
	tl.Quiet = quietStretches(win, tl.From, tl.To)
	tl.devices = windowDevices(win)
	b := builder{tl: tl, byFrame: map[groupKey]int32{}, names: map[string]int{}}

	// Rebuilding backwards: the bytes at From are today's minus what the
	// window's events did since. The live figures are per site, not per
	// device: with several devices a site's bytes start on the first
	// device, and its series per device are exact only in their changes.
	if after >= 0 {
		for _, st := range live {
			if st.LiveBytes != 0 {
				b.groupOf(st.Site, "").pre += st.LiveBytes
			}
		}
		for i := range win {
			if changesBytes(win[i].Kind) {
				b.groupOf(win[i].Site, win[i].Device).pre -= delta(&win[i])
			}
		}
	}
	b.rankGroups(win, cfg.bands)
	b.sample(win, sampleTimes(win, tl.From, tl.To, cfg.samples))
	b.markers(win)
	return tl
}

// builder holds the scratch state of one build.
type builder struct {
	tl      *Timeline
	byFrame map[groupKey]int32
	names   map[string]int
	// rank maps a group to its series index; len(tl.Series)-1 is "other"
	// when there is one.
	rank []int32
}

// groupKey is what a group gathers: one line, on one device when the
// timeline splits by device.
type groupKey struct {
	frame  track.Frame
	device string
}

// groupOf returns the group of site's allocations on device, creating it on
// first use. Sites are found by slot in a slice: a map lookup per event
// would dominate the cost of building from a million events.
func (b *builder) groupOf(site *track.Site, device string) *group {
	return &b.tl.groups[b.groupIndex(site, device)]
}

func (b *builder) groupIndex(site *track.Site, device string) int32 {
	tl := b.tl
	id := -1
	if site != nil {
		var g int32
		if g, id = tl.groupAt(site, device); g >= 0 {
			return g
		}
	}
	var fr track.Frame
	if site != nil {
		fr = site.Location()
	} else {
		fr = track.Frame{Function: format.UnknownFunction}
	}
	key := groupKey{frame: track.Frame{Function: fr.Function, File: fr.File, Line: fr.Line}}
	name := label(key.frame)
	if tl.devices != nil {
		key.device = tl.devices[tl.deviceIndex(device)]
		name += " @" + key.device
	}
	g, ok := b.byFrame[key]
	if !ok {
		g = int32(len(tl.groups))
		b.byFrame[key] = g
		tl.groups = append(tl.groups, group{name: b.uniqueName(name), frame: key.frame, device: key.device, site: site})
	}
	if id >= 0 {
		for id >= len(tl.siteGroup) {
			tl.siteGroup = append(tl.siteGroup, -1)
		}
		tl.siteGroup[id] = g
		tl.groups[g].sites++
	}
	return g
}

// groupAt returns the group of site's allocations on device, -1 when it has
// none yet, and the slot that holds it in siteGroup.
func (tl *Timeline) groupAt(site *track.Site, device string) (g int32, slot int) {
	slot = tl.slot(site.ID(), device)
	if slot < len(tl.siteGroup) {
		return tl.siteGroup[slot], slot
	}
	return -1, slot
}

func (b *builder) uniqueName(name string) string {
	b.names[name]++
	if n := b.names[name]; n > 1 {
		return name + " #" + strconv.Itoa(n)
	}
	return name
}

// label renders a location as the legend shows it.
func label(f track.Frame) string {
	if f.File == "" {
		return format.Function(f.Function)
	}
	return format.Function(f.Function) + " (" + format.File(f.File) + ":" + strconv.Itoa(f.Line) + ")"
}

// rankGroups walks the window once for each group's peak and picks the
// series: the bands groups that held the most at once.
func (b *builder) rankGroups(win []track.Event, bands int) {
	tl := b.tl
	for i := range win {
		if changesBytes(win[i].Kind) {
			b.groupIndex(win[i].Site, win[i].Device)
		}
	}
	gs := tl.groups
	for i := range gs {
		gs[i].cur = gs[i].pre
		gs[i].peak = max(gs[i].pre, 0)
	}
	for i := range win {
		e := &win[i]
		if !changesBytes(e.Kind) {
			continue
		}
		g := &gs[b.groupIndex(e.Site, e.Device)]
		g.cur += delta(e)
		g.peak = max(g.peak, g.cur)
	}
	order := make([]int32, 0, len(gs))
	for i := range gs {
		if gs[i].peak > 0 {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(x, y int32) int {
		a, c := &gs[x], &gs[y]
		return cmp.Or(cmp.Compare(c.peak, a.peak), cmp.Compare(c.cur, a.cur), strings.Compare(a.name, c.name))
	})
	b.rank = make([]int32, len(gs))
	top := min(bands, len(order))
	for i := range b.rank {
		b.rank[i] = int32(top) // "other" unless ranked below
	}
	for i, g := range order[:top] {
		b.rank[g] = int32(i)
		grp := &gs[g]
		tl.Series = append(tl.Series, Series{Name: grp.name, Device: grp.device, Function: grp.frame.Function, File: grp.frame.File,
			Line: grp.frame.Line, Site: grp.site, Sites: grp.sites, Peak: grp.peak})
	}
	if rest := len(order) - top; rest > 0 {
		tl.Series = append(tl.Series, Series{Name: b.uniqueName(OtherName), Sites: rest})
	}
}

// sample walks the window again, recording each series at the given times.
func (b *builder) sample(win []track.Event, times []int64) {
	tl := b.tl
	gs := tl.groups
	tl.Times = times
	ns := len(tl.Series)
	values := make([]int64, ns*len(times)) // one allocation for every series
	for s := range tl.Series {
		tl.Series[s].Values = values[s*len(times) : (s+1)*len(times) : (s+1)*len(times)]
	}
	tl.Total = make([]int64, len(times))
	sums := make([]int64, ns) // live bytes per series now
	var total int64
	for i := range gs {
		gs[i].cur = gs[i].pre
		if r := b.rank[i]; int(r) < ns {
			sums[r] += gs[i].pre
		}
		total += gs[i].pre
	}
	hasOther := ns > 0 && tl.Series[ns-1].Other()
	var otherPeak int64
	if hasOther {
		otherPeak = max(sums[ns-1], 0)
	}
	tl.Peak = max(total, 0)
	i := 0
	for k, t := range times {
		for ; i < len(win) && win[i].Time <= t; i++ {
			e := &win[i]
			if !changesBytes(e.Kind) {
				continue
			}
			g := b.groupIndex(e.Site, e.Device)
			d := delta(e)
			gs[g].cur += d
			total += d
			tl.Peak = max(tl.Peak, total)
			if r := b.rank[g]; int(r) < ns {
				sums[r] += d
				if hasOther && int(r) == ns-1 {
					otherPeak = max(otherPeak, sums[r])
				}
			}
		}
		// Under concurrent allocation a series can be rebuilt below zero;
		// no memory is held negatively, so it shows as none.
		var sum int64
		for s := range ns {
			v := max(sums[s], 0)
			tl.Series[s].Values[k] = v
			sum += v
		}
		tl.Total[k] = sum
	}
	if hasOther {
		tl.Series[ns-1].Peak = otherPeak
	}
}

// sampleTimes returns the instants to sample: From, every distinct event
// time and To when they are at most n, else n evenly spaced instants.
func sampleTimes(win []track.Event, from, to int64, n int) []int64 {
	times := []int64{from}
	for i := range win {
		if t := win[i].Time; changesBytes(win[i].Kind) && t > times[len(times)-1] {
			if len(times) == n {
				return evenTimes(from, to, n)
			}
			times = append(times, t)
		}
	}
	if to > times[len(times)-1] {
		if len(times) == n {
			return evenTimes(from, to, n)
		}
		times = append(times, to)
	}
	return times
}

func evenTimes(from, to int64, n int) []int64 {
	span, steps := to-from, int64(n-1)
	// span*k overflows int64 for spans of days and millions of samples, so
	// the step is split into its whole and remainder parts.
	whole, rest := span/steps, span%steps
	times := make([]int64, n)
	for k := range times {
		kk := int64(k)
		times[k] = from + whole*kk + rest*kk/steps
	}
	return times
}

// markers lists the window's notable events.
func (b *builder) markers(win []track.Event) {
	names := map[*track.Site]string{}
	for i := range win {
		e := &win[i]
		if changesBytes(e.Kind) {
			continue
		}
		m := Marker{Kind: e.Kind, Time: e.Time, Bytes: e.Bytes, Site: e.Site}
		if e.Site != nil {
			name, ok := names[e.Site]
			if !ok {
				name = label(e.Site.Location())
				names[e.Site] = name
			}
			m.Name = name
		}
		b.tl.Markers = append(b.tl.Markers, m)
	}
}

// budgetOf sums the budgets of tr's parts that have one (PartInfo, read
// through the tracker's seam), saturating.
func budgetOf(tr *track.Tracker) int64 {
	parts, _ := tr.Books().PartInfos()
	var sum int64
	for _, p := range parts {
		if p.Budget > math.MaxInt64-sum {
			return math.MaxInt64
		}
		sum += p.Budget // 0 without a budget: PartInfos clamps
	}
	return sum
}
