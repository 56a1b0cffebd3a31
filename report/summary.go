package report

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// Errors of WriteSummary.
var (
	// ErrNilWriter means WriteSummary was given a nil io.Writer.
	ErrNilWriter = errors.New("report: nil writer")
	// ErrInvalidOption means an option's value cannot be used, or the
	// Sources it names hold a nil source.
	ErrInvalidOption = errors.New("report: invalid option")
)

type config struct {
	top     int
	now     func() time.Time
	sources Sources
}

// Option configures WriteSummary. Option values are immutable and may be
// shared.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithSources adds the figures of pools, caches and devices made without the
// tracker to a summary; those made with it are in it already.
func WithSources(src Sources) Option {
	return optionFunc(option.Set(src, func(c *config, src Sources) { c.sources = src }))
}

// DefaultTopSites is how many sites a summary lists unless TopSites says.
const DefaultTopSites = 10

// MaxTopSites bounds TopSites: a longer list is no longer read.
const MaxTopSites = 100

// TopSites sets how many call sites the summary lists, most live bytes
// first: 0..MaxTopSites, default DefaultTopSites.
func TopSites(n int) Option {
	return optionFunc(option.Within("TopSites", n, 0, MaxTopSites, func(c *config, n int) { c.top = n }))
}

// summaryWidth is the widest line a summary writes.
const summaryWidth = 100

// heldIndent indents the lines that say who holds a suspect's memory.
const heldIndent = 6

// Bytes formats a byte count as every report of tensorlife writes it:
// "512 B", "1.5 KiB", "8 MiB", in powers of 1024 with one decimal at most.
// A program that logs figures beside a summary uses it to say them alike.
func Bytes(n int64) string { return format.Bytes(n) }

// WriteSummary writes a text report of tr's memory in the manner of
// torch.cuda.memory_summary: totals and peak, the figures of the pools,
// caches and devices made with tr (and of WithSources), what the pools'
// admission admitted and refused by request kind and what each kind
// reserves (pool.Stats.AdmissionKinds), the top call sites
// by live bytes with the bytes that outlived their request, the open
// requests holding most and open longest (facts, never suspects: memory in
// flight is not judged), what each kind of request cost at its peak
// (track.RequestKinds), and the current suspects of each watcher of tr.
// Lines fit in 100 columns; the site lines name the function and file:line
// that allocated. A tracker with nothing live gets a report saying so.
//
// It reads counters only (Totals, SiteTotals, the sources' figures),
// never walking the live set,
// so it costs the same at a thousand live tensors as at a million. It may
// be called concurrently with allocation.
func WriteSummary(w io.Writer, tr *track.Tracker, opts ...Option) error {
	if invariants.IsNil(w) {
		return ErrNilWriter
	}
	if tr == nil {
		return track.ErrNilTracker
	}
	cfg := config{top: DefaultTopSites, now: tr.Now} // the tracker's clock, injected or the wall's
	if err := option.Apply(&cfg, opts, Option.apply, ErrInvalidOption); err != nil {
		return err
	}
	if err := cfg.sources.Validate(); err != nil {
		return err
	}
	now := cfg.now()
	var b strings.Builder
	writeHeader(&b, tr, now)
	// The parts are read first, so that the totals count a panic of
	// theirs in this reading.
	reading := cfg.sources.Read(tr)
	writeTotals(&b, totals(tr))
	writePools(&b, reading.Pools)
	writeAdmission(&b, reading.Pools)
	writeCaches(&b, reading.Caches)
	writeOwners(&b, tr.Owners())
	writeDevices(&b, reading.Devices)
	writeSkipped(&b, reading.Skipped)
	writeOpenRequests(&b, tr.OpenRequests(openRequestRows))
	writeRequestKinds(&b, tr.RequestCosts())
	writeSites(&b, tr, cfg.top)
	for _, sr := range reading.Watchers {
		writeSuspects(&b, sr, reading.Pools, now)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHeader(b *strings.Builder, tr *track.Tracker, now time.Time) {
	fmt.Fprintf(b, "tensorlife memory summary: tracker %q\n", tr.Name())
	fmt.Fprintf(b, "taken %s, tracker up %s\n", now.UTC().Format("2006-01-02 15:04:05 MST"),
		format.Age(now.Sub(tr.Started())))
	b.WriteString(strings.Repeat("=", summaryWidth))
	b.WriteByte('\n')
}

// totals reads tr's counters. While a HelperFunctions name has matched no
// stack, every site's headline is resolved first (each site once, however
// many summaries), so that the count says whether it matches any.
func totals(tr *track.Tracker) track.Totals {
	t := tr.Totals()
	if t.HelpersUnmatched > 0 {
		for _, st := range tr.SiteTotals() {
			st.Site.Location()
		}
		t = tr.Totals()
	}
	return t
}

func writeTotals(b *strings.Builder, t track.Totals) {
	row := func(name, value string) { fmt.Fprintf(b, "  %-26s%s\n", name, value) }
	b.WriteString("Totals\n")
	row("live tensors", strconv.FormatInt(t.LiveCount, 10))
	row("live bytes", format.Bytes(t.LiveBytes))
	row("peak live bytes", format.Bytes(t.PeakBytes))
	row("allocations", fmt.Sprintf("%d (%s)", t.Allocs, format.Bytes(t.AllocBytes)))
	row("frees", fmt.Sprintf("%d (%s)", t.Frees, format.Bytes(t.AllocBytes-t.LiveBytes)))
	row("GC-detected leaks", strconv.FormatInt(t.GCLeaks, 10))
	row("misuse", fmt.Sprintf("%d (double frees: %d)", t.Misuse, t.Event(track.EventDoubleFree)))
	row("out-of-memory errors", strconv.FormatInt(t.Event(track.EventOOM), 10))
	row("mask rebuilds", strconv.FormatInt(t.Event(track.EventMaskRebuilt), 10))
	row("leak suspects flagged", strconv.FormatInt(t.Event(track.EventLeakSuspect), 10))
	row("call sites", fmt.Sprintf("%d (allocations past the site limit: %d)", t.Sites, t.Overflowed))
	if t.HelpersUnmatched > 0 {
		row("unmatched helper names", fmt.Sprintf("%d (HelperFunctions names no stack matched)", t.HelpersUnmatched))
	}
	row("stack capture fallbacks", fmt.Sprintf("%d (untrusted walks: %d; past a full walk cache: %d)",
		t.StackFallbacks, t.StackMismatches, t.StackUncached))
	row("free lines lost", fmt.Sprintf("%d (frees a double-free report cannot name)", t.FreeLinesLost))
	row("labels truncated", fmt.Sprintf("%d tensors (labels are cut at 16 keys of 256 bytes)", t.LabelsTruncated))
	if t.LeakReportsLost > 0 {
		row("leak reports lost", fmt.Sprintf("%d (a leak callback fell 4096 reports behind; the leaks are counted above)", t.LeakReportsLost))
	}
	if t.PartPanics > 0 {
		row("part panics", fmt.Sprintf("%d (calls into code tensorlife does not own, recovered)", t.PartPanics))
	}
}

// writeSkipped lists the sources whose figures are missing from the
// reading because a call into them panicked.
func writeSkipped(b *strings.Builder, skipped []error) {
	if len(skipped) == 0 {
		return
	}
	b.WriteString("\nUnread parts (a call panicked: their figures are unknown)\n")
	for _, err := range skipped {
		fmt.Fprintf(b, "  %s\n", clip(err.Error(), summaryWidth-2))
	}
}

func writePools(b *strings.Builder, pools []pool.Stats) {
	if len(pools) == 0 {
		return
	}
	b.WriteString("\nPools\n")
	fmt.Fprintf(b, "  %-12s%14s%14s%14s%14s%14s%14s\n",
		"device", "reserved", "active", "cached", "peak reserved", "peak active", "limit")
	for _, s := range pools {
		limit := "none"
		if s.Limit > 0 {
			limit = format.Bytes(s.Limit)
		}
		// A source's figures are shown clamped: none can be negative.
		fmt.Fprintf(b, "  %-12s%14s%14s%14s%14s%14s%14s\n", clip(s.Device, 12),
			bytesOf(s.Reserved), bytesOf(s.Active), bytesOf(s.Cached),
			bytesOf(s.PeakReserved), bytesOf(s.PeakActive), limit)
		// Two lines, so that counters of any size stay within 100 columns.
		fmt.Fprintf(b, "  %-12shits %d, misses %d, evictions %d, OOMs %d\n", "",
			max(s.Hits, 0), max(s.Misses, 0), max(s.Evictions, 0), max(s.OOMs, 0))
		fmt.Fprintf(b, "  %-12sdevice allocs %d, device frees %d\n", "", max(s.DeviceAllocs, 0), max(s.DeviceFrees, 0))
	}
}

// bytesOf formats a byte figure that cannot be negative, a negative one
// (from a source that says so) as 0 B.
func bytesOf(n int64) string { return format.Bytes(max(n, 0)) }

func writeCaches(b *strings.Builder, caches []mask.CacheStats) {
	if len(caches) == 0 {
		return
	}
	// A cache charges its budget more than its masks' tensor bytes (which
	// Owners and the sites show): their keys and an overhead per entry too.
	b.WriteString("\nCaches (charged: what counts against the budget, masks' tensor bytes plus keys and entries)\n")
	fmt.Fprintf(b, "  %-16s%13s%13s%10s%12s%12s%12s\n",
		"name", "charged", "budget", "entries", "hits", "misses", "evictions")
	for _, s := range caches {
		budget := "none"
		if s.MaxBytes > 0 {
			budget = format.Bytes(s.MaxBytes)
		}
		fmt.Fprintf(b, "  %-16s%13s%13s%10d%12d%12d%12d\n", clip(s.Name, 16),
			bytesOf(s.Bytes), budget, max(s.Entries, 0), max(s.Hits, 0), max(s.Misses, 0), max(s.Evictions, 0))
	}
}

// writeOwners writes what each owner tensors were handed to holds (a
// cache, a session store), against its bound, with the line that filled it
// most: an owner over its bound is a leak suspect of its own.
func writeOwners(b *strings.Builder, owners []track.OwnerStats) {
	if len(owners) == 0 {
		return
	}
	b.WriteString("\nOwners (what tensors were handed to)\n")
	const head = "  %-16s%13s%9s%13s  "
	fmt.Fprintf(b, head+"%s\n", "name", "bytes", "tensors", "bound", "filled most at")
	room := summaryWidth - len(fmt.Sprintf(head, "", "", "", ""))
	for _, o := range owners {
		bound := "none"
		if o.MaxBytes > 0 {
			bound = format.Bytes(o.MaxBytes)
		}
		where := ""
		if len(o.Sites) > 0 {
			where = "other lines"
			if o.Sites[0].Site != nil {
				where = siteLine(o.Sites[0].Site, room)
			}
		}
		fmt.Fprintf(b, head+"%s\n", clip(o.Name, 16), format.Bytes(o.Bytes), strconv.FormatInt(o.Count, 10), bound, where)
		if o.OverBound() {
			fmt.Fprintf(b, "%*sOVER ITS BOUND by %s\n", 4, "", format.Bytes(o.Bytes-o.MaxBytes))
		}
		if o.Dropped {
			fmt.Fprintf(b, "%*sdropped without giving its tensors back: each handle is reported as the collector finds it\n", 4, "")
		}
	}
}

// writeDevices writes each device's memory split by whose it is: used,
// of it what tensorlife's allocators reserved and what is outside
// tensorlife, then free and total.
func writeDevices(b *strings.Builder, devices []DeviceMemory) {
	if len(devices) == 0 {
		return
	}
	b.WriteString("\nDevices (outside tensorlife: used on the device, not reserved by tensorlife)\n")
	fmt.Fprintf(b, "  %-16s%13s%13s%13s%13s%13s\n", "name", "used", "reserved", "outside", "free", "total")
	for _, d := range devices {
		if d.Err != nil {
			msg := "memory unknown: " + d.Err.Error()
			fmt.Fprintf(b, "  %-16s%s\n", clip(d.Device, 16), clip(msg, summaryWidth-18))
			continue
		}
		fmt.Fprintf(b, "  %-16s%13s%13s%13s%13s%13s\n", clip(d.Device, 16),
			format.Bytes(d.Used), format.Bytes(d.Reserved), format.Bytes(d.Outside),
			format.BytesOf(d.Free, d.Total), format.Bytes(d.Total))
	}
}

// openRequestRows is how many requests each list of the Open requests
// section shows.
const openRequestRows = 5

// writeOpenRequests writes the open requests holding most in flight and
// those open longest, each with its bytes, tensors, peak, age, labels (cut
// to the line) and the site where it holds most; then what the requests
// not among the largest hold, so that the rows and the others make the
// in-flight bytes.
func writeOpenRequests(b *strings.Builder, open track.OpenRequests) {
	if open.Count == 0 {
		return
	}
	fmt.Fprintf(b, "\nOpen requests (%d open, %s in %s in flight; in flight is never a leak)\n",
		open.Count, format.Bytes(open.InFlightBytes), plural(open.InFlightTensors, "tensor"))
	const head = "  %-8s %12s %8s %12s %9s  "
	room := summaryWidth - len(fmt.Sprintf(head, "", "", "", "", ""))
	rows := func(title string, rs []track.RequestStats) {
		fmt.Fprintf(b, head+"%s\n", title, "in flight", "tensors", "peak", "age", "labels")
		for i, r := range rs {
			labels := r.Labels.String()
			fmt.Fprintf(b, head+"%s\n", strconv.Itoa(i+1)+".", format.Bytes(r.InFlightBytes),
				strconv.FormatInt(r.InFlightTensors, 10), format.Bytes(r.PeakBytes), format.Age(r.Age), clip(labels, room))
			if r.TopSite != nil {
				const indent = 13
				fmt.Fprintf(b, "%*s%s\n", indent, "", frameLine("most at ", r.TopSite.Location(), summaryWidth-indent))
			}
		}
	}
	rows("largest", open.Largest)
	if open.OthersCount > 0 {
		fmt.Fprintf(b, head+"%s\n", "others", format.Bytes(open.OthersBytes), strconv.FormatInt(open.OthersTensors, 10),
			"", "", plural(int64(open.OthersCount), "request"))
	}
	rows("oldest", open.Oldest)
}

// writeRequestKinds writes, per request kind and device, how many requests
// ended, their peak in-flight bytes at p50, p99 and max, and the bytes that
// outlived them.
func writeRequestKinds(b *strings.Builder, kinds []track.RequestKindStats) {
	if len(kinds) == 0 {
		return
	}
	b.WriteString("\nRequest kinds (ended requests: peak in-flight bytes, p50/p99 within one bucket of 1/8)\n")
	const head = "  %-32s %-10s %9s %10s %10s %10s %11s\n"
	fmt.Fprintf(b, head, "kind", "device", "requests", "peak p50", "peak p99", "peak max", "outlived")
	for _, k := range kinds {
		fmt.Fprintf(b, head, clip(k.Kind, 32), clip(k.Device, 10), strconv.FormatInt(k.Requests, 10),
			format.Bytes(k.PeakP50), format.Bytes(k.PeakP99), format.Bytes(k.PeakMax), format.Bytes(k.OutlivedBytes))
	}
}

func writeSites(b *strings.Builder, tr *track.Tracker, top int) {
	var live []track.SiteStats
	for _, st := range tr.SiteTotals() { // per-site counters: no walk of the live set
		if st.LiveBytes > 0 || st.LiveCount > 0 {
			live = append(live, st)
		}
	}
	fmt.Fprintf(b, "\nTop sites by live bytes (%d of %d sites with live tensors)\n", min(top, len(live)), len(live))
	if len(live) == 0 {
		b.WriteString("  nothing is live\n")
		return
	}
	// The outlived column is what a watcher judges: bytes of tensors that
	// outlived their request (track.WithRequest).
	const head = "  %4s %12s %9s %12s  "
	fmt.Fprintf(b, head+"%s\n", "rank", "live bytes", "count", "outlived", "site")
	room := summaryWidth - len(fmt.Sprintf(head, "", "", "", ""))
	listed := live[:min(top, len(live))]
	sites := make([]*track.Site, len(listed))
	for i := range listed {
		sites[i] = listed[i].Site
	}
	for i, s := range listed {
		fmt.Fprintf(b, head+"%s\n", strconv.Itoa(i+1), format.Bytes(s.LiveBytes),
			strconv.FormatInt(s.LiveCount, 10), format.Bytes(s.OutlivedBytes), siteLine(s.Site, room))
		writeVia(b, s.Site, sites, summaryWidth-room, room)
	}
}

func writeSuspects(b *strings.Builder, w WatcherReading, pools []pool.Stats, now time.Time) {
	r := w.Rules
	window := "1 tick"
	if r.Every > 0 {
		window = r.Every.String()
	} else if r.Ticks > 1 {
		window = strconv.Itoa(r.Ticks) + " ticks"
	}
	title := fmt.Sprintf("Leak suspects (window %s; outlived bytes grew in %d of %d windows by over %s; %d windows ended)",
		window, r.MostOf, r.Windows, format.Bytes(r.MinGrowth), w.WindowsEnded)
	if len(title) > summaryWidth { // past 99 windows ended, say it shorter
		title = fmt.Sprintf("Leak suspects (window %s; outlived grew in %d of %d windows by over %s; %d ended)",
			window, r.MostOf, r.Windows, format.Bytes(r.MinGrowth), w.WindowsEnded)
	}
	fmt.Fprintf(b, "\n%s\n", clip(title, summaryWidth))
	suspects := w.Suspects
	if len(suspects) == 0 {
		b.WriteString("  none\n")
		return
	}
	const head = "  %12s %14s %5s %9s  "
	fmt.Fprintf(b, head+"%s\n", "outlived", "growth/window", "grew", "since", "site")
	room := summaryWidth - len(fmt.Sprintf(head, "", "", "", ""))
	sites := make([]*track.Site, 0, len(suspects))
	for _, s := range suspects {
		if !s.IsOwner() {
			sites = append(sites, s.Site)
		}
	}
	owners, handles := false, false
	for _, s := range suspects {
		if s.IsOwner() {
			owners = true
			where := "other lines"
			if s.Site != nil {
				where = siteLine(s.Site, room)
			}
			fmt.Fprintf(b, head+"%s\n", format.Bytes(s.OutlivedBytes), "-", "over", format.Age(now.Sub(s.Since)), where)
			fmt.Fprintf(b, "%*s%s\n", heldIndent, "", clip(fmt.Sprintf("owner %q holds %d tensors, over its bound of %s",
				s.Owner, s.OutlivedCount, format.Bytes(s.OwnerMaxBytes)), summaryWidth-heldIndent))
			continue
		}
		if s.IsHandle() {
			handles = true
			fmt.Fprintf(b, head+"%s\n", format.Bytes(s.OutlivedBytes), "-", "held", format.Age(now.Sub(s.Since)), siteLine(s.Site, room))
			writeVia(b, s.Site, sites, summaryWidth-room, room)
			fmt.Fprintf(b, "%*s%s\n", heldIndent, "", clip(fmt.Sprintf("%s taken here under a request outlived it: still held after it ended",
				plural(s.Handles, "handle")), summaryWidth-heldIndent))
			continue
		}
		fmt.Fprintf(b, head+"%s\n", format.Bytes(s.OutlivedBytes), format.Bytes(s.GrowthPerWindow),
			fmt.Sprintf("%d/%d", s.Grew, s.OfWindows), format.Age(now.Sub(s.Since)), siteLine(s.Site, room))
		writeVia(b, s.Site, sites, summaryWidth-room, room)
		for _, h := range s.HeldBy { // wider than the site column: a description is long
			fmt.Fprintf(b, "%*s%s\n", heldIndent, "", clip(format.HeldBy(h.String(), h.Live), summaryWidth-heldIndent))
		}
		switch refused := oomsOn(pools, s.Device); {
		case s.RanOut != "":
			// The watcher's own fact: it stays named while its memory is
			// what ran out.
			format.Wrap(b, strings.Repeat(" ", heldIndent)+"memory ran out: ", s.RanOut+
				"; it stays a suspect until its bytes are freed or handed to an owner", summaryWidth)
		case refused > 0:
			// Memory has run out: a forecast of when it will would
			// contradict the error the service already got.
			fmt.Fprintf(b, "%*s%s\n", heldIndent, "", clip(fmt.Sprintf("ran out: %s refused on %s for lack of memory, so no forecast",
				plural(refused, "allocation"), s.Device), summaryWidth-heldIndent))
		case s.RunsOutIn > 0:
			fmt.Fprintf(b, "%*s%s\n", heldIndent, "", clip(fmt.Sprintf("%s: the %s on %s, %s left, forecast %s",
				s.Forecast(), s.HeadroomOf, s.Device, bytesOf(s.Headroom),
				s.ForecastAt.UTC().Format("15:04:05")), summaryWidth-heldIndent))
		}
	}
	format.Wrap(b, "  what to do: ", watch.Advice+".", summaryWidth)
	if owners {
		format.Wrap(b, "  for an owner: ", watch.OwnerAdvice+".", summaryWidth)
	}
	if handles {
		format.Wrap(b, "  for a handle: ", watch.HandleAdvice+".", summaryWidth)
	}
}

// oomsOn is how many allocations the pools on device refused for lack of
// memory.
func oomsOn(pools []pool.Stats, device string) int64 {
	var n int64
	for _, p := range pools {
		if p.Device == device {
			n += p.OOMs
		}
	}
	return n
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// writeVia writes, under a site's row, "via caller (file.go:line)": the
// frame that tells it apart from another listed site with the same line
// (one line reached from two callers), if there is one.
func writeVia(b *strings.Builder, s *track.Site, listed []*track.Site, indent, room int) {
	if s == nil {
		return
	}
	via, ok := s.DistinctFrame(listed)
	if !ok {
		return
	}
	fmt.Fprintf(b, "%*s%s\n", indent, "", frameLine("via ", via, room))
}

// siteLine renders a site as "pkg.Function (file.go:line)" in at most room
// columns, cutting the function's left end first: its last element and the
// file name are what a reader looks for.
func siteLine(s *track.Site, room int) string {
	if s == nil { // a source's suspect that names no site
		return "an unknown site"
	}
	return frameLine("", s.Location(), room)
}

// frameLine renders f as siteLine renders a site, after prefix.
func frameLine(prefix string, f track.Frame, room int) string {
	fn := prefix + format.Function(f.Function)
	where := fmt.Sprintf(" (%s:%d)", format.File(f.File), f.Line)
	if len(fn)+len(where) > room {
		keep := max(room-len(where)-3, 0)
		fn = "..." + fn[len(fn)-min(keep, len(fn)):]
	}
	return clip(fn+where, room)
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return s[:n]
	}
	return s[:n-3] + "..."
}
