package mask

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"weak"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Advice is what every rebuild report tells the reader to do.
const Advice = "build the mask once per request and grow it with Append"

// Rebuild describes a mask built again where it should have been built once
// and grown: the call site had already built a mask for the same request.
type Rebuild struct {
	// Site is the call stack that built the mask; nil when the allocator
	// has no tracker.
	Site *track.Site
	// Location is the first frame outside tensorlife and outside
	// allocation helpers (track.HelperFunctions), as track.Site.Location finds it:
	// the line that built the mask.
	Location track.Frame
	// Labels are the request's labels.
	Labels track.Labels
	// Count is how many masks this site has built for this request, this
	// one included, as far as the Builder remembers (at least 2).
	Count int
	// PreviousLive reports whether the site's previous mask for this
	// request was still live: two copies held at once, the pattern that
	// leaks when the old ones are kept.
	PreviousLive bool
	// Bytes is the size of the new mask.
	Bytes int64
	// Refused reports whether the Builder freed the new mask and returned
	// an error (Strict).
	Refused bool
}

// String describes the rebuild for a person who must fix it.
func (r Rebuild) String() string {
	live := ""
	if r.PreviousLive {
		live = ", previous still live"
	}
	return fmt.Sprintf("mask rebuilt at %s for request %s: mask %d from this site for this request (%s%s); %s",
		r.Location, r.Labels, r.Count, format.Bytes(r.Bytes), live, Advice)
}

// RebuildError is returned in strict mode for a rebuilt mask. It matches
// ErrMaskRebuilt with errors.Is.
type RebuildError struct {
	Rebuild
}

func (e *RebuildError) Error() string { return "mask: " + e.Rebuild.String() }

// Is reports whether target is ErrMaskRebuilt.
func (e *RebuildError) Is(target error) bool { return target == ErrMaskRebuilt }

// stackDepth is how many frames identify a call site when the allocator has
// no tracker to intern stacks: enough to tell apart the callers of a helper
// that builds masks, few enough to keep a detector entry small.
const stackDepth = 16

// siteKey identifies a call site: the tracker's interned Site, or, without
// a tracker (or for its overflow site, which stands for many stacks), the
// program counters the Builder captured itself.
type siteKey struct {
	site *track.Site
	pcs  [stackDepth]uintptr
}

type requestKey struct {
	site   siteKey
	labels string
}

// reqEntry is one remembered (site, request) pair, in LRU order. The
// previous mask is held weakly: the detector must never keep a mask
// reachable, or it would hide the leaks the garbage collector reports.
type reqEntry struct {
	key        requestKey
	count      int
	lastTensor weak.Pointer[tensor.Tensor]
	lastGrow   weak.Pointer[Growable]
}

func (e *reqEntry) previousLive() bool {
	if t := e.lastTensor.Value(); t != nil && !t.Freed() {
		return true
	}
	if g := e.lastGrow.Value(); g != nil && !g.Freed() {
		return true
	}
	return false
}

func (e *reqEntry) setLast(t *tensor.Tensor, g *Growable) {
	e.lastTensor, e.lastGrow = weak.Pointer[tensor.Tensor]{}, weak.Pointer[Growable]{}
	if g != nil {
		e.lastGrow = weak.Make(g)
	} else {
		e.lastTensor = weak.Make(t)
	}
}

// maxReportSites bounds the per-site counters that pace the default log
// report. Sites are lines of code, so this is rarely reached; when it is,
// the counters start over.
const maxReportSites = 1024

// detector remembers which (site, request) pairs built masks, bounded by
// LRU eviction. One mutex guards it: it is taken once per mask built (not
// per token), and holds for a map lookup and a list move.
type detector struct {
	mu      sync.Mutex
	max     int
	entries map[requestKey]*lruElem[reqEntry]
	order   lruList[reqEntry]
	perSite map[siteKey]int64
}

func newDetector(max int) *detector {
	return &detector{max: max, entries: make(map[requestKey]*lruElem[reqEntry]), perSite: make(map[siteKey]int64)}
}

// note records a mask from key and returns the pair's count, whether the
// previous mask was live, and the site's rebuild count (0 if this was no
// rebuild). A refused mask does not replace the remembered previous one.
func (d *detector) note(key requestKey, t *tensor.Tensor, g *Growable, refuse bool) (count int, prevLive bool, siteRebuilds int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	el := d.entries[key]
	if el == nil {
		if len(d.entries) >= d.max {
			old := d.order.Back()
			d.order.Remove(old)
			delete(d.entries, old.Value.key)
		}
		el = &lruElem[reqEntry]{Value: reqEntry{key: key, count: 1}}
		el.Value.setLast(t, g)
		d.entries[key] = el
		d.order.PushFront(el)
		return 1, false, 0
	}
	d.order.MoveToFront(el)
	e := &el.Value
	e.count++
	prevLive = e.previousLive()
	if !refuse {
		e.setLast(t, g)
	}
	if len(d.perSite) >= maxReportSites && d.perSite[key.site] == 0 {
		clear(d.perSite)
	}
	d.perSite[key.site]++
	return e.count, prevLive, d.perSite[key.site]
}

// remembered returns how many pairs the detector holds.
func (d *detector) remembered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}

// observe runs rebuild detection on a mask just made: t, or g's first
// tensor t. It returns a *RebuildError in strict mode; the caller frees.
func (b *Builder) observe(ctx context.Context, t *tensor.Tensor, g *Growable) error {
	if b.det == nil {
		return nil
	}
	labels := track.LabelsFrom(ctx)
	if labels.Len() == 0 {
		return nil
	}
	key := requestKey{labels: labels.String()}
	site := t.Site()
	if site != nil && !site.Overflow() {
		key.site.site = site
	} else {
		// observe <- newMask or NewGrowable <- the builder method <- caller:
		// the stack is the same for every call from one line either way.
		runtime.Callers(2, key.site.pcs[:])
	}
	count, prevLive, siteRebuilds := b.det.note(key, t, g, b.cfg.strict)
	if count < 2 {
		return nil
	}
	b.rebuilds.Add(1)
	r := Rebuild{Site: site, Labels: labels, Count: count, PreviousLive: prevLive, Bytes: t.Bytes(), Refused: b.cfg.strict}
	if key.site.site != nil {
		r.Location = site.Location()
	} else {
		r.Location = b.ownSite(key.site.pcs[:]).Location()
	}
	if tr := b.alloc.Tracker(); tr != nil {
		tr.Books().Note(track.EventMaskRebuilt, site, r.Bytes)
	}
	if b.cfg.onRebuild != nil {
		b.cfg.onRebuild(r)
	} else if !b.cfg.strict && siteRebuilds&(siteRebuilds-1) == 0 {
		// The 1st, 2nd, 4th, 8th... rebuild at each site: a loop that
		// rebuilds every step logs O(log steps) lines, and every site that
		// rebuilds is named at least once. In strict mode the error is the
		// report.
		b.logRebuild(r, siteRebuilds)
	}
	if b.cfg.strict {
		return &RebuildError{Rebuild: r}
	}
	return nil
}

// logRebuild writes the default rebuild report through the logger of the
// allocator's tracker (track.Logger), slog.Default() for an untracked one.
func (b *Builder) logRebuild(r Rebuild, siteRebuilds int64) {
	logger := slog.Default()
	if tr := b.alloc.Tracker(); tr != nil {
		logger = tr.Logger()
	}
	logger.Warn("tensorlife: mask rebuilt; "+Advice,
		slog.String("site", r.Location.String()),
		slog.String("labels", r.Labels.String()),
		slog.Int("count", r.Count),
		slog.Bool("previous_live", r.PreviousLive),
		slog.Int64("bytes", r.Bytes),
		slog.Int64("site_rebuilds", siteRebuilds),
		slog.Bool("refused", r.Refused))
}

// ownSite interns a stack the Builder captured itself, so that a report
// names its line as a tracker's Site does (track.Site.Location: the first
// frame outside tensorlife and outside allocation helpers). The table is
// the Builder's own, made on the first report that needs it: the
// allocator's tracker has none, or a full one. It holds maxReportSites
// stacks; past that, reports name the overflow site.
func (b *Builder) ownSite(pcs []uintptr) *track.Site {
	n := 0
	for n < len(pcs) && pcs[n] != 0 {
		n++
	}
	return b.ownSites().Books().Intern(pcs[:n])
}
