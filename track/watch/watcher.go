package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// Errors of a Watcher's life.
var (
	// ErrStopped means the watcher was stopped: a second Stop, or a Tick,
	// Start or Run after Stop.
	ErrStopped = errors.New("watch: watcher stopped")
	// ErrRunning means Start or Run was called while the watcher's loop was
	// already running.
	ErrRunning = errors.New("watch: watcher already running")
	// ErrWindowKind means a call that does not fit how the watcher's windows
	// end: Tick on a watcher with timed windows (Every), Start or Run on one
	// with counted windows (EveryTicks).
	ErrWindowKind = errors.New("watch: call does not fit the watcher's kind of window")
)

// Advice is what a suspect's reports tell the reader to do: the memory
// outlived the request that made it, so either a path (an error path, a
// cancelled request, an early return) does not free it, or it is meant to
// outlive requests and should say so by its owner.
const Advice = "free it on the path named, errors and cancellations included; " +
	"if it is meant to outlive its request, hand it to an owner: tensor.(*Tensor).HandTo with a track.Owner " +
	"(one with MaxBytes is held to its bound)"

// Suspect is a call site whose outlived bytes keep growing: a likely leak.
type Suspect struct {
	Site      *track.Site
	LiveBytes int64 // all live bytes of the site at the latest window's end
	LiveCount int64
	// OutlivedBytes and OutlivedCount are what the site was judged on: its
	// live tensors that outlived their request (track.WithRequest).
	OutlivedBytes int64
	OutlivedCount int64
	// BaselineBytes had outlived their request when the growth that flagged
	// the site began; the site stops being a suspect when it falls back.
	BaselineBytes int64
	// GrowthPerWindow is the average growth of the outlived bytes since
	// the growth began: at the flag, over the last K windows (or over the
	// run of growth that flagged a slow leak), then over every window since.
	GrowthPerWindow int64
	Grew            int // the outlived bytes grew in Grew of the last OfWindows windows
	OfWindows       int // the windows judged (K)
	Since           time.Time
	SinceWindow     uint64 // the window that flagged it, counted from 1
	// Device is the device the site's tensors are on (the one with most of
	// its live bytes), as the tracker names it; read when the site is
	// flagged.
	Device string
	// RunsOutIn forecasts, if the outlived bytes keep growing at
	// GrowthPerSecond, how long until the memory they draw from runs out:
	// Headroom divided by the rate. 0 means unknown: the windows' times
	// say nothing yet (counted windows ended at one instant), the site
	// did not grow over them, or no attached allocator tells the
	// headroom, or it has run out already (RanOut). Updated at each
	// window while the site is a suspect. See the package doc for the
	// model and its limits.
	RunsOutIn time.Duration
	// GrowthPerSecond is the rate the forecast extrapolates: the growth of
	// the outlived bytes over the windows since the growth began (at most
	// History), over the time those windows took. Against a pool's budget
	// it is scaled by what the pool's blocks hold over what its tensors
	// do: the pool rounds each tensor up to its size class.
	GrowthPerSecond float64
	// Headroom is what the forecast divides by the rate: the bytes the
	// site's allocator may still take, HeadroomOf says which: "pool budget"
	// (a budget less what a pool's blocks hold) or "device memory" (the
	// device's free bytes).
	Headroom   int64
	HeadroomOf string
	// ForecastAt is the end of the window RunsOutIn was made at.
	ForecastAt time.Time
	// RanOut says, while the memory the suspect draws from is exhausted,
	// how: an allocation on its device failed since its outlived bytes
	// last grew, or the headroom left there is below its growth per
	// window. Empty while memory is left. A leak stops growing when memory
	// is full, the moment it matters most: a suspect whose memory ran out
	// stays one however long it stops growing, until its bytes are freed
	// or handed to an owner (its outlived bytes fall below their highest);
	// RunsOutIn is then 0, as there is nothing left to forecast, and
	// Forecast says it has run out.
	RanOut string
	// HeldBy names, when extra owners (a View, a Retain, a cache entry)
	// keep the site's tensors alive after their own handles were freed,
	// those owners by the line that made them, most handles first: the
	// line to change. Filled once, when the site is flagged.
	HeldBy []track.Holder

	// Owner is set for an owner that holds more than its byte bound
	// (track.Owner.MaxBytes; see OwnerStats.OverBound) rather than a site
	// whose outlived bytes grow: its name. That is no leak, and is never
	// reported as one: the owner is over its bound. OwnerID tells two
	// owners of one name apart (track.OwnerStats.ID), OwnerFirst is the
	// line of its first hand-over, OwnerMaxBytes its bound and OwnerSites
	// the lines that filled it, most bytes first; Site is the first of
	// them, and OutlivedBytes and OutlivedCount what the owner holds. It
	// stays one while it holds more than its bound.
	Owner         string
	OwnerID       uint64
	OwnerFirst    *track.Site
	OwnerMaxBytes int64
	OwnerSites    []track.OwnerSite

	// Handles is set for a line whose handles outlived their request
	// rather than a site whose outlived bytes grow: handles (a Retain, a
	// cache hit) taken there under a request (tensor.Tensor.RetainContext,
	// mask.Cache.GetOrBuild) and still held when it ended, how many are
	// held now. Site is the line that took them, OutlivedBytes the bytes
	// of the records they hold, which another holder (a cache) may keep
	// too. A fact, named at the first window after the request's end
	// with no growth to wait for; it stays one until each handle is
	// freed, handed to an owner or dropped.
	Handles int64
}

// IsOwner reports whether s is an owner over its byte bound, not a site.
func (s Suspect) IsOwner() bool { return s.Owner != "" }

// IsHandle reports whether s is a line whose handles outlived their
// request (Handles), not a site whose outlived bytes grow.
func (s Suspect) IsHandle() bool { return s.Handles > 0 }

// Forecast says when s runs out of memory as every report of tensorlife
// says it ("runs out in ~1h12m at 32 KiB/s"); "" when there is no forecast
// (RunsOutIn is 0).
func (s Suspect) Forecast() string {
	if s.RanOut != "" {
		return "has run out: " + s.RanOut
	}
	if s.RunsOutIn <= 0 {
		return ""
	}
	return format.Forecast(s.RunsOutIn, s.GrowthPerSecond)
}

// Watcher watches a tracker's outlived bytes per call site over windows of
// requests or time and names the sites that keep growing: leak suspects.
// See the package doc for the rules. A Watcher is safe for concurrent use;
// it starts no goroutine except the one Start starts, which Stop ends.
type Watcher struct {
	tr  *track.Tracker
	cfg config

	ticks        atomic.Uint64
	windows      atomic.Uint64
	suspectCount atomic.Int64
	panics       atomic.Int64
	// owners are the owners over their byte bound now, by their ID in the
	// tracker; under mu.
	owners map[uint64]*Suspect
	// handles are the lines whose handles outlived their request now, by
	// site ID; under mu.
	handles map[int]*Suspect

	// mu guards the feed, the per-site state and the window times; a
	// window end holds it while judging, so windows are judged in the
	// order they end.
	mu            sync.Mutex
	feed          *track.SiteFeed
	changed       []track.SiteStats  // the feed's buffer, reused
	changedOwners []track.OwnerStats // the feed's owner buffer, reused
	// sites are the histories of the sites that changed within the last
	// History windows, and of the suspects. levels are the outlived bytes
	// (and runs) of the other sites with any: a site with nothing outlived costs
	// nothing, one that holds a level costs a map entry, and only a site
	// that changed lately costs a history. A watcher's memory is
	// O(sites it judges), never O(sites ever seen).
	sites      map[int]*siteHistory
	sitesPeak  int // the most entries sites had since it was last copied
	levels     map[int]level
	levelsPeak int
	settle     []settling     // sites to fold back into levels once they stop changing, oldest first
	suspects   []*siteHistory // the sites that are suspects now
	ranOutNow  []*siteHistory // suspects whose memory ran out at this window, to log
	times      []time.Time    // window end times by window modulo History+1; times[0] is New's

	// lifeMu guards stopping and the loop's state.
	lifeMu     sync.Mutex
	stopped    atomic.Bool
	done       chan struct{}
	running    bool
	loopExited chan struct{} // closed when the running loop returns
	inCallback atomic.Bool   // the loop is calling OnSuspect
}

// level is a settled site: its outlived bytes, unchanged for a whole
// history, and its current run (see siteHistory), kept so that a sparse
// leak whose steps lie further apart than History windows keeps its run.
type level struct {
	bytes    int64
	runStart uint64
	runBase  int64
	runSteps int
	lastGrow uint64
}

// settling is a site queued to leave sites: at window at, it changed last.
type settling struct {
	id int
	at uint64
}

// siteHistory is one site's outlived bytes at the end of recent windows, in
// a ring indexed by window number modulo its length (History+1 samples
// bound History windows), written when the site changes and filled forward
// lazily: a window end touches only the sites that changed and the
// suspects.
type siteHistory struct {
	site    *track.Site
	suspect *Suspect // nil unless the site is a suspect now
	ring    []int64
	at      uint64 // the latest window written into ring
	queued  bool   // in settle

	// The current run: the windows since its outlived bytes last shrank.
	runStart uint64 // the window the run began at
	runBase  int64  // outlived bytes then
	runSteps int    // windows of the run in which they grew
	lastGrow uint64 // the last window in which they grew

	// A suspect's growth since its flag: its highest outlived bytes, the
	// window they were reached, and the longest stretch of windows
	// between two new highs since its growth began (see keepsGrowing).
	peak       int64
	peakAt     uint64
	longestGap uint64
	baseAt     uint64 // the window of its BaselineBytes
	// peakRate is its growth per window while it grew, from its baseline
	// to its highest: what a headroom must exceed for memory to be left.
	peakRate int64
	// The refused allocations on the suspect's device (track.Tracker.
	// OutOfMemoryOn): oomDevice is the device they are read for, oomLast
	// the count at the latest window, oomBase the count before the window
	// of its highest. A count past oomBase is an allocation that failed
	// since it stopped growing: its memory ran out.
	oomDevice        string
	oomLast, oomBase int64
}

func (h *siteHistory) value(i uint64) int64 { return h.ring[i%uint64(len(h.ring))] }

// steps calls f with the values at the ends of windows i-1 and i, for i
// from+1 through to, oldest first: a window end's loops over a history,
// with no division per value (to-from is at most the ring's length less
// one).
func (h *siteHistory) steps(from, to uint64, f func(prev, cur int64)) {
	size := uint64(len(h.ring))
	j := from % size
	prev := h.ring[j]
	for range to - from {
		if j++; j == size {
			j = 0
		}
		cur := h.ring[j]
		f(prev, cur)
		prev = cur
	}
}

// fillTo carries the latest value forward to window n: the site did not
// change in between.
func (h *siteHistory) fillTo(n uint64) {
	if n <= h.at {
		return
	}
	size := uint64(len(h.ring))
	last := h.value(h.at)
	from := max(h.at+1, n-min(n, size-1))
	for i := from; i <= n; i++ {
		h.ring[i%size] = last
	}
	h.at = n
}

// New returns a watcher of tr. It reads every site once as the baseline of
// the first window and starts nothing: with counted windows, call Tick;
// with timed windows, call Run or Start. It keeps the outlived bytes of the
// sites that have any, a map entry each; sites without cost nothing. An
// invalid option returns an error matching ErrInvalidOption. Each
// watcher's windows are its own: watchers of one tracker, made, stopped or
// dropped, never change each other's verdicts. The watcher attaches itself
// to tr (track.Attach), weakly, so that a summary or a metrics bridge of tr
// shows its suspects.
func New(tr *track.Tracker, opts ...Option) (*Watcher, error) {
	if tr == nil {
		return nil, track.ErrNilTracker
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	w := &Watcher{tr: tr, cfg: cfg, done: make(chan struct{}), feed: tr.Books().NewSiteFeed(),
		sites: map[int]*siteHistory{}, levels: map[int]level{}, times: make([]time.Time, cfg.history+1)}
	if cfg.onSuspect == nil {
		logger, name := tr.Logger(), tr.Name()
		w.cfg.onSuspect = func(s Suspect) { logSuspect(logger, name, s, w.Suspects()) }
	}
	for _, st := range w.feed.Changed(nil) {
		if st.OutlivedBytes != 0 {
			w.levels[st.Site.ID()] = level{bytes: st.OutlivedBytes, runBase: st.OutlivedBytes}
		}
	}
	w.times[0] = tr.Now()
	track.Attach(tr, w)
	return w, nil
}

// Tracker returns the tracker w watches.
func (w *Watcher) Tracker() *track.Tracker { return w.tr }

// newHistory makes the history of a site that has none at window n: from
// the site's level if it holds one, else from nothing outlived. Called
// with w.mu held.
func (w *Watcher) newHistory(s *track.Site, n uint64) *siteHistory {
	id := s.ID()
	h := &siteHistory{site: s, ring: make([]int64, w.cfg.history+1), at: n, runStart: n}
	if l, ok := w.levels[id]; ok {
		delete(w.levels, id)
		for i := range h.ring {
			h.ring[i] = l.bytes
		}
		h.runStart, h.runBase, h.runSteps, h.lastGrow = l.runStart, l.runBase, l.runSteps, l.lastGrow
	}
	w.sites[id] = h
	return h
}

// settleSites folds the sites that have not changed for a whole history
// back into levels (or into nothing, with nothing outlived): their ring
// holds one value, which is all a level is. Called with w.mu held at the
// end of window n; O(sites it folds).
func (w *Watcher) settleSites(n uint64) {
	i := 0
	for ; i < len(w.settle) && w.settle[i].at+uint64(w.cfg.history) < n; i++ {
		e := w.settle[i]
		h := w.sites[e.id]
		if h == nil {
			continue
		}
		if h.at != e.at || h.suspect != nil {
			if h.suspect == nil {
				w.settle = append(w.settle, settling{id: e.id, at: h.at}) // changed since: wait again
			} else {
				h.queued = false // a suspect is queued again when it clears
			}
			continue
		}
		delete(w.sites, e.id)
		if v := h.value(h.at); v != 0 {
			w.levels[e.id] = level{bytes: v, runStart: h.runStart, runBase: h.runBase, runSteps: h.runSteps,
				lastGrow: h.lastGrow}
		}
	}
	w.settle = w.settle[i:]
	// Go maps and slices keep their largest size: after a wave of changes
	// (a deploy, a burst of new sites), copy what is left into smaller ones.
	if i > 0 && len(w.sites) < w.sitesPeak/4 {
		smaller := make(map[int]*siteHistory, len(w.sites)) // maps.Clone would keep the size
		maps.Copy(smaller, w.sites)
		w.sites, w.sitesPeak = smaller, len(w.sites)
		w.settle = slices.Clone(w.settle)
		w.changed = nil
	}
	w.sitesPeak = max(w.sitesPeak, len(w.sites))
	if len(w.levels) < w.levelsPeak/4 {
		smaller := make(map[int]level, len(w.levels))
		maps.Copy(smaller, w.levels)
		w.levels, w.levelsPeak = smaller, len(w.levels)
	}
	w.levelsPeak = max(w.levelsPeak, len(w.levels))
}

// queueSettle queues h to be folded into levels once it stops changing.
func (w *Watcher) queueSettle(h *siteHistory) {
	if !h.queued {
		h.queued = true
		w.settle = append(w.settle, settling{id: h.site.ID(), at: h.at})
	}
}

// maxSuspectHolders bounds Suspect.HeldBy.
const maxSuspectHolders = 4

// nameHolders fills the newly flagged suspects' HeldBy, in the copies to
// report and in the watcher's own, with one walk of the live set for all of
// them, outside the watcher's lock: flags are rare, windows are not.
func (w *Watcher) nameHolders(flagged []Suspect) {
	sites := make([]*track.Site, len(flagged))
	for i := range flagged {
		sites[i] = flagged[i].Site
	}
	for i, hs := range w.tr.Books().HeldBy(sites, maxSuspectHolders) {
		flagged[i].HeldBy = hs
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range flagged {
		if h := w.sites[s.Site.ID()]; h != nil && h.suspect != nil && h.suspect.SinceWindow == s.SinceWindow {
			h.suspect.HeldBy = s.HeldBy
		}
	}
}

// logSuspect is the default OnSuspect. Where another current suspect has
// the same line, it adds the frame that tells them apart, as every report
// does.
func logSuspect(l *slog.Logger, tracker string, s Suspect, current []Suspect) {
	if s.IsOwner() {
		logOwnerSuspect(l, tracker, s)
		return
	}
	if s.IsHandle() {
		logHandleSuspect(l, tracker, s)
		return
	}
	held := make([]string, len(s.HeldBy))
	for i, h := range s.HeldBy {
		held[i] = format.HeldBy(h.String(), h.Live) // as every report says it
	}
	sites := make([]*track.Site, 0, len(current))
	for _, c := range current {
		if !c.IsOwner() {
			sites = append(sites, c.Site)
		}
	}
	via := ""
	if f, ok := s.Site.DistinctFrame(sites); ok {
		via = format.Via(f.Function, f.File, f.Line)
	}
	l.Warn("tensorlife: leak suspect: bytes that outlived their request keep growing at one call site",
		slog.String("tracker", tracker),
		slog.String("site", s.Site.String()),
		slog.String("via", via),
		slog.Int64("growth_per_window", s.GrowthPerWindow),
		slog.Int("grew", s.Grew),
		slog.Int("windows", s.OfWindows),
		slog.Int64("live_bytes", s.LiveBytes),
		slog.Int64("outlived_bytes", s.OutlivedBytes),
		slog.Duration("runs_out_in", s.RunsOutIn),
		slog.String("runs_out_of", forecastOf(s)),
		slog.Any("held_by", held),
		slog.String("advice", Advice),
		slog.String("stack", s.Site.Stack("")))
}

// Tick counts one request; every EveryTicks calls it ends a window, which
// costs O(sites that changed + suspects), asks the tracker's allocators for
// their headroom while there are suspects (the forecast), and may call
// OnSuspect before returning. After Stop it returns ErrStopped; on a watcher with timed
// windows, ErrWindowKind.
func (w *Watcher) Tick() error {
	if w.stopped.Load() {
		return ErrStopped
	}
	if w.cfg.ticks == 0 {
		return ErrWindowKind
	}
	// A window of one Tick, the default, counts nothing: every call ends
	// one.
	if w.cfg.ticks == 1 || w.ticks.Add(1)%uint64(w.cfg.ticks) == 0 {
		w.endWindow(false)
	}
	return nil
}

// Run ends a window every Every interval until ctx is done (it returns
// ctx.Err()) or Stop is called (it returns nil). The caller owns the
// goroutine Run runs on. On a watcher with counted windows it returns
// ErrWindowKind.
func (w *Watcher) Run(ctx context.Context) error {
	exited, err := w.claimLoop()
	if err != nil {
		return err
	}
	defer close(exited)
	return w.loop(ctx)
}

// Start runs the timed windows on a goroutine of the watcher's own, which
// Stop ends. It returns ErrWindowKind on a watcher with counted windows.
func (w *Watcher) Start() error {
	exited, err := w.claimLoop()
	if err != nil {
		return err
	}
	go w.runLoop(exited)
	return nil
}

// runLoop runs the loop of Start until Stop, which reports. A callback
// that ends the loop's goroutine with runtime.Goexit, which no recover
// stops, ends one run of the loop, on a goroutine of its own, and the next
// starts at once: the watcher goes on as after a callback's panic.
func (w *Watcher) runLoop(exited chan struct{}) {
	defer close(exited)
	for {
		returned := make(chan bool, 1)
		go func() {
			ok := false
			defer func() { returned <- ok }()
			_ = w.loop(context.Background())
			ok = true
		}()
		if <-returned {
			return
		}
		w.lifeMu.Lock()
		if w.stopped.Load() {
			w.lifeMu.Unlock()
			return
		}
		w.running = true // the ended run's deferred bookkeeping cleared it
		w.lifeMu.Unlock()
	}
}

// claimLoop marks the loop running, so that only one runs and Stop knows
// what to wait for.
func (w *Watcher) claimLoop() (chan struct{}, error) {
	if w.cfg.interval == 0 {
		return nil, ErrWindowKind
	}
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	if w.stopped.Load() {
		return nil, ErrStopped
	}
	if w.running {
		return nil, ErrRunning
	}
	w.running = true
	w.loopExited = make(chan struct{})
	return w.loopExited, nil
}

func (w *Watcher) loop(ctx context.Context) error {
	defer func() {
		w.lifeMu.Lock()
		w.running = false
		w.lifeMu.Unlock()
	}()
	ticker := time.NewTicker(w.cfg.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.done:
			return nil
		case <-ticker.C:
			// A stop racing the tick wins: no window ends after Stop
			// returns.
			select {
			case <-w.done:
				return nil
			default:
			}
			w.endWindow(true)
		}
	}
}

// Stop stops the watcher: later Ticks do nothing and the loop of Run or
// Start returns. It waits for that loop to return, except while the loop
// is calling OnSuspect (which may be what called Stop); the loop then
// returns as soon as the callback does. A window that a concurrent Tick is
// ending may still complete. Suspects stay readable. A second call returns
// ErrStopped.
func (w *Watcher) Stop() error {
	w.lifeMu.Lock()
	if w.stopped.Load() {
		w.lifeMu.Unlock()
		return ErrStopped
	}
	w.stopped.Store(true)
	close(w.done)
	running, exited := w.running, w.loopExited
	w.lifeMu.Unlock()
	w.mu.Lock()
	w.feed.Close()
	w.mu.Unlock()
	if running && !w.inCallback.Load() {
		<-exited
	}
	return nil
}

// Suspects returns the current leak suspects, most outlived bytes first.
func (w *Watcher) Suspects() []Suspect {
	w.mu.Lock()
	out := make([]Suspect, 0, len(w.suspects)+len(w.owners)+len(w.handles))
	for _, h := range w.suspects {
		out = append(out, *h.suspect)
	}
	for _, o := range w.owners {
		out = append(out, *o)
	}
	for _, s := range w.handles {
		out = append(out, *s)
	}
	w.mu.Unlock()
	sortSuspects(out)
	return out
}

// SuspectCount returns how many sites are suspects now: a counter, cheap
// enough for a metrics callback, where Suspects copies and sorts.
func (w *Watcher) SuspectCount() int { return int(w.suspectCount.Load()) }

// WindowsEnded returns how many windows have ended.
func (w *Watcher) WindowsEnded() uint64 { return w.windows.Load() }

// Rules are a watcher's settings, as a report prints them.
type Rules struct {
	Ticks     int           // a window is this many Ticks; 0 if timed
	Every     time.Duration // a window is this long; 0 if counted
	Windows   int           // K
	MostOf    int
	MinGrowth int64
}

// PartInfo says what the watcher is, for its tracker's readers (a Watcher
// is a track.Part): a part that holds no memory. A summary reads its
// suspects.
func (w *Watcher) PartInfo() track.PartInfo { return track.PartInfo{Kind: "watcher", Left: -1} }

// Rules returns w's settings.
func (w *Watcher) Rules() Rules {
	c := &w.cfg
	return Rules{Ticks: c.ticks, Every: c.interval, Windows: c.windows, MostOf: c.mostOf, MinGrowth: c.minGrowth}
}

func sortSuspects(s []Suspect) {
	slices.SortFunc(s, func(a, b Suspect) int {
		return cmp.Or(cmp.Compare(b.OutlivedBytes, a.OutlivedBytes), cmp.Compare(b.LiveBytes, a.LiveBytes),
			cmp.Compare(siteID(a.Site), siteID(b.Site)), strings.Compare(a.Owner, b.Owner))
	})
}

func siteID(s *track.Site) int {
	if s == nil {
		return -1
	}
	return s.ID()
}

// endWindow reads the sites that changed, judges them and the suspects,
// forecasts the suspects, and reports the newly flagged ones after
// releasing the lock.
func (w *Watcher) endWindow(fromLoop bool) {
	w.mu.Lock()
	if w.stopped.Load() {
		w.mu.Unlock()
		return
	}
	n := w.windows.Add(1)
	w.changed = w.feed.Changed(w.changed[:0])
	w.changedOwners = w.feed.ChangedOwners(w.changedOwners[:0]) // O(owners that changed)
	size := uint64(len(w.times))
	if len(w.changed) == 0 && len(w.changedOwners) == 0 && len(w.suspects) == 0 {
		// Nothing to judge, the window end of a quiet service: no clock
		// read. The window's time is the last one read, which only a
		// forecast reads back, as the start of a span over which the
		// suspect's bytes were the same (a suspect's windows read the
		// clock).
		w.times[n%size] = w.times[(n-1)%size]
		w.settleSites(n)
		w.mu.Unlock()
		return
	}
	now := w.tr.Now() // the tracker's clock, as its ages and snapshots
	w.times[n%size] = now
	var flagged []*siteHistory
	var reports, handleReports []Suspect
	for _, st := range w.changed {
		if s, ok := w.judgeHandles(st, n, now); ok {
			handleReports = append(handleReports, s)
		}
		cur := st.OutlivedBytes
		id := st.Site.ID()
		h := w.sites[id]
		if h == nil {
			if w.levels[id].bytes == cur {
				continue // back where it was, or nothing outlived from the start: no history to keep
			}
			h = w.newHistory(st.Site, n-1)
		}
		h.fillTo(n - 1)
		h.ring[n%uint64(len(h.ring))], h.at = cur, n
		if h.suspect == nil {
			w.queueSettle(h)
		}
		if n <= w.cfg.warmUp {
			// Still warming up: the whole history is the latest value.
			for i := range h.ring {
				h.ring[i] = cur
			}
			h.runStart, h.runBase, h.runSteps = n, cur, 0
			continue
		}
		switch prev := h.value(n - 1); {
		case cur < prev:
			h.runStart, h.runBase, h.runSteps = n, cur, 0
		case cur > prev:
			h.runSteps++
			h.lastGrow = n
		}
		if w.judge(h, st, n, now) {
			flagged = append(flagged, h)
			reports = append(reports, *h.suspect) // its figures at the flag
		}
	}
	// Suspects that did not change are judged too: one that stopped
	// growing clears.
	for i := 0; i < len(w.suspects); i++ {
		if h := w.suspects[i]; h.at < n {
			h.fillTo(n)
			w.judge(h, h.site.Stats(), n, now)
		}
	}
	w.suspects = slices.DeleteFunc(w.suspects, func(h *siteHistory) bool {
		if h.suspect == nil {
			w.queueSettle(h)
			return true
		}
		return false
	})
	w.settleSites(n)
	ownerReports := w.judgeOwners(w.changedOwners, n, now)
	w.suspectCount.Store(int64(len(w.suspects) + len(w.owners) + len(w.handles)))
	var ranOut []Suspect
	for _, h := range w.ranOutNow {
		if h.suspect != nil {
			ranOut = append(ranOut, *h.suspect)
		}
	}
	w.ranOutNow = w.ranOutNow[:0]
	var ests []estimate
	if len(flagged) == 0 {
		ests = w.estimates(n) // under this lock: a window with no flag takes it once
	}
	w.mu.Unlock()

	if len(flagged) > 0 {
		// The new suspects' devices come first: their forecast is of
		// their device's headroom.
		w.nameDevices(flagged, n)
		w.mu.Lock()
		ests = w.estimates(w.windows.Load())
		w.mu.Unlock()
	}
	w.forecast(ests)
	for _, s := range ranOut {
		w.logRanOut(s)
	}
	if len(flagged) == 0 && len(ownerReports) == 0 && len(handleReports) == 0 {
		return
	}
	w.addForecasts(reports)
	sortSuspects(reports)
	w.nameHolders(reports)
	if fromLoop {
		w.inCallback.Store(true)
		defer w.inCallback.Store(false)
	}
	for _, s := range reports {
		if w.stopped.Load() {
			return // nothing is reported after Stop has returned
		}
		w.tr.Books().Note(track.EventLeakSuspect, s.Site, s.OutlivedBytes)
		w.callOnSuspect(s)
	}
	for _, s := range ownerReports {
		if w.stopped.Load() {
			return
		}
		w.tr.Books().Note(track.EventOwnerOverBound, s.Site, s.OutlivedBytes)
		w.callOnSuspect(s)
	}
	for _, s := range handleReports {
		if w.stopped.Load() {
			return
		}
		w.tr.Books().Note(track.EventLeakSuspect, s.Site, s.OutlivedBytes)
		w.callOnSuspect(s)
	}
}

// judgeHandles makes a suspect of the changed site st if handles taken
// there outlived their request and it is not one yet, returning it to
// report, updates one that is, and clears one whose handles are all freed
// or handed to an owner: a verdict from a fact, begun and ended by one.
// Called with w.mu held.
func (w *Watcher) judgeHandles(st track.SiteStats, n uint64, now time.Time) (Suspect, bool) {
	id := st.Site.ID()
	s := w.handles[id]
	if st.OutlivedHandles <= 0 {
		if s != nil {
			delete(w.handles, id)
		}
		return Suspect{}, false
	}
	if s != nil {
		s.Handles, s.OutlivedCount, s.OutlivedBytes = st.OutlivedHandles, st.OutlivedHandles, st.OutlivedHandleBytes
		return Suspect{}, false
	}
	s = &Suspect{Site: st.Site, Handles: st.OutlivedHandles, OutlivedCount: st.OutlivedHandles,
		OutlivedBytes: st.OutlivedHandleBytes, LiveBytes: st.OutlivedHandleBytes, LiveCount: st.OutlivedHandles,
		Since: now, SinceWindow: n}
	if w.handles == nil {
		w.handles = make(map[int]*Suspect)
	}
	w.handles[id] = s
	return *s, true
}

// HandleAdvice is what the report of a handle that outlived its request
// says to do.
const HandleAdvice = "free the handle on the path named before the request ends, errors and cancellations " +
	"included; a handle from a cache hit is the request's to free. If it is meant to outlive its request, " +
	"hand it to an owner: tensor.(*Tensor).HandTo"

// logHandleSuspect is logSuspect for a line whose handles outlived their
// request.
func logHandleSuspect(l *slog.Logger, tracker string, s Suspect) {
	l.Warn("tensorlife: a handle outlived its request: taken under the request at this line, still held after it ended",
		slog.String("tracker", tracker),
		slog.String("site", s.Site.String()),
		slog.Int64("handles", s.Handles),
		slog.Int64("bytes", s.OutlivedBytes),
		slog.String("advice", HandleAdvice),
		slog.String("stack", s.Site.Stack("")))
}

// judgeOwners makes a suspect of each changed owner over its byte bound
// that is not one yet, returning those to report, and clears the changed
// owners back within their bounds: O(owners that changed). Called with
// w.mu held.
func (w *Watcher) judgeOwners(changed []track.OwnerStats, n uint64, now time.Time) []Suspect {
	if len(changed) == 0 {
		return nil // most windows of most services: nothing to judge, nothing made
	}
	var flagged []*Suspect
	for _, o := range changed {
		if !o.OverBound() {
			delete(w.owners, o.ID)
			continue
		}
		s := w.owners[o.ID]
		if s == nil {
			s = &Suspect{Owner: o.Name, OwnerID: o.ID, Since: now, SinceWindow: n}
			if w.owners == nil {
				w.owners = make(map[uint64]*Suspect)
			}
			w.owners[o.ID] = s
			flagged = append(flagged, s)
		}
		s.OwnerMaxBytes, s.OwnerSites, s.OwnerFirst = o.MaxBytes, o.Sites, o.First
		s.OutlivedBytes, s.OutlivedCount = o.Bytes, o.Count
		s.LiveBytes, s.LiveCount = o.Bytes, o.Count
		s.Site = o.First
		if len(o.Sites) > 0 && o.Sites[0].Site != nil {
			s.Site = o.Sites[0].Site
		}
	}
	reports := make([]Suspect, len(flagged))
	for i, s := range flagged {
		reports[i] = *s // its figures at the flag
	}
	return reports
}

// addForecasts copies into the reports of the sites just flagged the
// device and the forecast made for them since, where they are still the
// suspects flagged: the rest of a report is its figures at the flag, even
// if later windows ended before it is reported.
func (w *Watcher) addForecasts(reports []Suspect) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range reports {
		r := &reports[i]
		h := w.sites[r.Site.ID()]
		if h == nil || h.suspect == nil || h.suspect.SinceWindow != r.SinceWindow {
			continue
		}
		s := h.suspect
		r.Device, r.RunsOutIn, r.GrowthPerSecond = s.Device, s.RunsOutIn, s.GrowthPerSecond
		r.Headroom, r.HeadroomOf, r.ForecastAt = s.Headroom, s.HeadroomOf, s.ForecastAt
	}
}

// OwnerAdvice is what a suspect owner's report says to do: an owner with a
// byte bound is trusted to keep it, and one that does not is a leak.
const OwnerAdvice = "the owner holds more than its bound (track.Owner.MaxBytes): free what it evicts " +
	"(each Free of the handle it keeps gives a tensor back), or raise the bound if it is meant to hold more"

// logOwnerSuspect is logSuspect for an owner over its byte bound.
func logOwnerSuspect(l *slog.Logger, tracker string, s Suspect) {
	lines := make([]string, 0, len(s.OwnerSites))
	for _, o := range s.OwnerSites {
		where := "other lines"
		if o.Site != nil {
			where = o.Site.String()
		}
		lines = append(lines, fmt.Sprintf("%s in %d tensors: %s", format.Bytes(o.Bytes), o.Count, where))
	}
	first := "unknown"
	if s.OwnerFirst != nil {
		first = s.OwnerFirst.String()
	}
	l.Warn("tensorlife: owner over its bound: it holds more than its MaxBytes",
		slog.String("tracker", tracker),
		slog.String("owner", s.Owner),
		slog.Uint64("owner_id", s.OwnerID),
		slog.String("first_handed_at", first),
		slog.Int64("bytes", s.OutlivedBytes),
		slog.Int64("tensors", s.OutlivedCount),
		slog.Int64("max_bytes", s.OwnerMaxBytes),
		slog.Any("filled_at", lines),
		slog.String("advice", OwnerAdvice))
}

// callOnSuspect runs OnSuspect under recover: a callback that panics is
// counted and logged, and neither the request that ticked nor the loop of
// Start dies of it.
func (w *Watcher) callOnSuspect(s Suspect) {
	defer func() {
		if p := recover(); p != nil {
			w.panics.Add(1)
			w.logPanic(p, s)
		}
	}()
	w.cfg.onSuspect(s)
}

// logPanic logs a callback's panic; a logger that panics in turn is not
// let through either.
func (w *Watcher) logPanic(p any, s Suspect) {
	defer func() { _ = recover() }()
	w.tr.Logger().Error("tensorlife: the watcher's OnSuspect callback panicked; the watcher goes on",
		slog.String("tracker", w.tr.Name()),
		slog.String("site", s.Site.String()),
		slog.String("panic", format.Value(p, 256)),
		slog.String("stack", string(debug.Stack())))
}

// CallbackPanics returns how many times OnSuspect panicked. Each panic is
// recovered and logged as an error through the tracker's logger
// (track.Logger).
func (w *Watcher) CallbackPanics() int64 { return w.panics.Load() }

// judge applies the suspect rules to one site at window n, whose figures
// at the window's end are st, and reports whether the site became a
// suspect now. Called with w.mu held.
func (w *Watcher) judge(h *siteHistory, st track.SiteStats, n uint64, now time.Time) bool {
	judged := n - w.cfg.warmUp // windows since the warm-up
	span := min(uint64(w.cfg.windows), judged)
	grew := 0
	h.steps(n-span, n, func(prev, cur int64) {
		if cur > prev {
			grew++
		}
	})
	live, start := h.value(n), h.value(n-span)
	net := live - start

	if s := h.suspect; s != nil {
		ooms := w.tr.Books().OutOfMemoryOn(s.Device)
		if s.Device != h.oomDevice { // named since the flag: counted from now on
			h.oomDevice, h.oomLast, h.oomBase = s.Device, ooms, ooms
		}
		if live > h.peak {
			h.oomBase = h.oomLast // a new high: what failed before it is no news of it
			h.peakRate = (live - s.BaselineBytes) / int64(max(n-h.baseAt, 1))
		}
		h.oomLast = ooms
		if live <= s.BaselineBytes {
			h.suspect = nil
			return false
		}
		growing := w.keepsGrowing(h, live, n)
		ranOut := w.ranOut(h, s, live, ooms)
		if !growing && ranOut == "" {
			h.suspect = nil
			return false
		}
		if ranOut != "" && s.RanOut == "" {
			w.ranOutNow = append(w.ranOutNow, h)
		}
		s.RanOut = ranOut
		s.LiveBytes, s.LiveCount = st.LiveBytes, st.LiveCount
		s.OutlivedBytes, s.OutlivedCount = live, st.OutlivedCount
		s.Grew = grew
		s.GrowthPerWindow = (live - s.BaselineBytes) / int64(max(n-h.baseAt, 1))
		return false
	}
	// What the site gave back over the history it has; while the history
	// fills, scaled up to a full one, so that a few early windows of a
	// swinging site do not pass for a leak.
	seen := min(uint64(w.cfg.history), judged)
	var gaveBack int64
	h.steps(n-seen, n, func(prev, cur int64) { gaveBack += max(prev-cur, 0) })
	bar := float64(gaveBack) * float64(w.cfg.history) / float64(seen)
	fast := grew >= w.cfg.mostOf && net > w.cfg.minGrowth && float64(net) > bar
	// A slow leak: grew just now, in at least MostOf windows of a run of a
	// whole history that never shrank, by more than MinGrowth.
	run := n - h.runStart
	slow := !fast && h.lastGrow == n && h.runSteps >= w.cfg.mostOf && run >= uint64(w.cfg.history) &&
		live-h.runBase > w.cfg.minGrowth
	if !fast && !slow {
		return false
	}
	s := &Suspect{Site: h.site, LiveBytes: st.LiveBytes, LiveCount: st.LiveCount,
		OutlivedBytes: live, OutlivedCount: st.OutlivedCount, BaselineBytes: start,
		GrowthPerWindow: net / int64(span), Grew: grew, OfWindows: w.cfg.windows, Since: now, SinceWindow: n}
	h.baseAt = n - span
	if slow {
		s.BaselineBytes = h.runBase
		h.baseAt = h.runStart
		s.GrowthPerWindow = (live - h.runBase) / int64(run)
	}
	h.peak, h.peakAt, h.longestGap, h.peakRate = live, n, 0, s.GrowthPerWindow
	h.oomDevice = s.Device
	h.oomLast = w.tr.Books().OutOfMemoryOn(s.Device)
	h.oomBase = h.oomLast
	// The gaps of the growth that flagged it, as far as the ring reaches.
	last := max(h.baseAt, n-min(n, uint64(w.cfg.history)))
	for i := last + 1; i <= n; i++ {
		if h.value(i) > h.value(i-1) {
			h.longestGap = max(h.longestGap, i-last)
			last = i
		}
	}
	h.suspect = s
	w.suspects = append(w.suspects, h)
	return true
}

// keepsGrowing is the rule that keeps a suspect one suspect for as long as
// it grows: it stays until its outlived bytes have not passed their highest
// since the flag for 2·K windows, or for 4 times the longest stretch between
// two new highs since its growth began, if longer. A leak that grows every
// window clears 2·K windows after it stops; one that grows in bursts, or
// every few requests at random, is not cleared by the pauses its own pace
// has shown. Called with w.mu held at window n.
func (w *Watcher) keepsGrowing(h *siteHistory, live int64, n uint64) bool {
	if live > h.peak {
		h.longestGap = max(h.longestGap, n-h.peakAt)
		h.peak, h.peakAt = live, n
		return true
	}
	quiet := max(2*uint64(w.cfg.windows), 4*h.longestGap)
	return n-h.peakAt < quiet
}

// ranOut says how the memory suspect s draws from ran out, at window end
// with live outlived bytes and ooms refused allocations on its device; ""
// while memory is left, or once some of its bytes were freed or handed to
// an owner since its highest (a leak that gives back is no longer what
// filled the memory). Two facts tell it: an allocation on its device
// failed since it last grew, or the headroom the latest forecast read
// there is below its growth per window. Called with w.mu held.
func (w *Watcher) ranOut(h *siteHistory, s *Suspect, live, ooms int64) string {
	if live < h.peak {
		return ""
	}
	on := s.Device
	if on == "" {
		on = "its device"
	}
	if failed := ooms - h.oomBase; failed > 0 {
		what := "an allocation"
		if failed > 1 {
			what = strconv.FormatInt(failed, 10) + " allocations"
		}
		return fmt.Sprintf("%s on %s failed for lack of memory since it last grew", what, on)
	}
	if s.HeadroomOf != "" && h.peakRate > 0 && s.Headroom < h.peakRate {
		return fmt.Sprintf("%s of the %s on %s left, less than its growth of %s a window",
			format.Bytes(max(s.Headroom, 0)), s.HeadroomOf, on, format.Bytes(h.peakRate))
	}
	return ""
}

// logRanOut logs, once per suspect, that the memory it draws from ran out
// and that it stays a suspect.
func (w *Watcher) logRanOut(s Suspect) {
	defer func() { _ = recover() }() // a logger's panic is not let through
	w.tr.Logger().Warn("tensorlife: leak suspect: the memory it draws from ran out; it stays a suspect until its bytes are freed or handed to an owner",
		slog.String("tracker", w.tr.Name()),
		slog.String("site", s.Site.String()),
		slog.String("ran_out", s.RanOut),
		slog.Int64("outlived_bytes", s.OutlivedBytes),
		slog.Uint64("since_window", s.SinceWindow),
		slog.String("advice", Advice))
}
