package track

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of the growth watcher.
var (
	// ErrWatcherStopped means the watcher was stopped: a second Stop, or a
	// Tick, Start or Run after Stop.
	ErrWatcherStopped = errors.New("track: watcher stopped")
	// ErrWatcherRunning means Start or Run was called while the watcher's
	// loop was already running.
	ErrWatcherRunning = errors.New("track: watcher already running")
	// ErrWindowKind means a call that does not fit how the watcher's windows
	// end: Tick on a watcher with timed windows (Every), Start or Run on one
	// with counted windows (EveryTicks).
	ErrWindowKind = errors.New("track: call does not fit the watcher's kind of window")
)

// Watcher defaults. With one window per request, a site that keeps memory
// on every request is flagged after 7 requests (MostOf defaults to three
// quarters of the windows).
const (
	DefaultWindows      = 8    // K: windows judged at once
	DefaultWatchHistory = 32   // windows remembered per site
	DefaultMinGrowth    = 4096 // bytes a suspect must grow by over K windows
	// DefaultSurvivorAge is A: a tensor counts as a survivor once it has
	// lived through the end of the window it was made in and one more.
	DefaultSurvivorAge = 2
)

// maxHistory bounds the per-site memory of a watcher: 8 bytes per window
// per site, 8 MiB at 1024 windows and 1024 sites.
const maxHistory = 1024

type watcherConfig struct {
	ticks     int           // a window is this many Tick calls; 0 if timed
	interval  time.Duration // a window is this long; 0 if counted
	windows   int
	history   int
	mostOf    int
	warmUp    uint64 // windows that only set the baseline
	age       int    // A: windows a tensor must have lived to be judged
	minGrowth int64
	onSuspect func(Suspect)
}

// EveryTicks ends a window every n calls of Watcher.Tick (default 1): with
// one Tick per request, windows are requests and tests are deterministic.
func EveryTicks(n int) Option {
	return only("EveryTicks", func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: EveryTicks(%d): want at least 1", ErrInvalidOption, n)
		}
		o.watcher.ticks = n
		return nil
	}, forWatcher)
}

// Every ends a window every d (at least MinEvery), on the goroutine Run or
// Start runs: for services that cannot tell where a request ends. It
// excludes EveryTicks.
func Every(d time.Duration) Option {
	return only("Every", func(o *options) error {
		if d < MinEvery {
			return fmt.Errorf("%w: Every(%v): want at least %v", ErrInvalidOption, d, MinEvery)
		}
		o.watcher.interval = d
		return nil
	}, forWatcher)
}

// Windows sets K, how many of the latest windows are judged together
// (default DefaultWindows). K must not exceed WatchHistory.
func Windows(k int) Option {
	return only("Windows", func(o *options) error {
		if k <= 0 {
			return fmt.Errorf("%w: Windows(%d): want at least 1", ErrInvalidOption, k)
		}
		o.watcher.windows = k
		return nil
	}, forWatcher)
}

// WatchHistory sets how many windows the watcher remembers per site
// (default DefaultWatchHistory, at most 1024). What a site gave back over
// that history is what its growth must beat to be flagged.
func WatchHistory(h int) Option {
	return only("WatchHistory", func(o *options) error {
		if h <= 0 || h > maxHistory {
			return fmt.Errorf("%w: WatchHistory(%d): want 1..%d", ErrInvalidOption, h, maxHistory)
		}
		o.watcher.history = h
		return nil
	}, forWatcher)
}

// MostOf sets in how many of the last K windows a site's live bytes must
// have grown (default three quarters of K, rounded up). It must not exceed K.
func MostOf(m int) Option {
	return only("MostOf", func(o *options) error {
		if m <= 0 {
			return fmt.Errorf("%w: MostOf(%d): want at least 1", ErrInvalidOption, m)
		}
		o.watcher.mostOf = m
		return nil
	}, forWatcher)
}

// MinGrowth sets how many bytes a site's live bytes must have grown by over
// the last K windows, strictly more than this, to be flagged (default
// DefaultMinGrowth).
func MinGrowth(bytes int64) Option {
	return only("MinGrowth", func(o *options) error {
		if bytes < 0 {
			return fmt.Errorf("%w: MinGrowth(%d): want 0 or more", ErrInvalidOption, bytes)
		}
		o.watcher.minGrowth = bytes
		return nil
	}, forWatcher)
}

// WarmUp makes the first n windows set the baseline without judging: a
// starting service ramps up to its concurrency, and the memory of work in
// flight (KV caches of running requests) grows window after window as a
// leak does. The watcher judges growth from the end of the warm-up, so a
// suspect's growth is measured from there, not from an empty process.
func WarmUp(n int) Option {
	return only("WarmUp", func(o *options) error {
		if n < 0 {
			return fmt.Errorf("%w: WarmUp(%d): want 0 or more windows", ErrInvalidOption, n)
		}
		o.watcher.warmUp = uint64(n)
		return nil
	}, forWatcher)
}

// SurvivorAge sets A, the age in windows from which a tensor's bytes are
// judged (default DefaultSurvivorAge; 0..8). A tensor made in a window is 1
// window old when that window ends, so with A = 2 a tensor is judged once it
// is still live at the end of the window after the one it was made in: it
// outlived its request. SurvivorAge(0) judges every live byte, as watchers
// did before they knew ages. Ages count the windows of the watcher that
// drives the tracker's age clock (see Watcher).
func SurvivorAge(windows int) Option {
	return only("SurvivorAge", func(o *options) error {
		if windows < 0 || windows > ageBuckets {
			return fmt.Errorf("%w: SurvivorAge(%d): want 0..%d", ErrInvalidOption, windows, ageBuckets)
		}
		o.watcher.age = windows
		return nil
	}, forWatcher)
}

// OnSuspect sets the function called once each time a site becomes a leak
// suspect. It runs on the goroutine that ended the window (a Tick caller or
// the Run loop), after the watcher's lock is released; it must not block.
// The default logs a warning through the tracker's logger.
func OnSuspect(f func(Suspect)) Option {
	return only("OnSuspect", func(o *options) error {
		if f == nil {
			return fmt.Errorf("%w: OnSuspect(nil)", ErrInvalidOption)
		}
		o.watcher.onSuspect = f
		return nil
	}, forWatcher)
}

// Suspect is a call site whose surviving bytes keep growing: a likely leak.
type Suspect struct {
	Site      *Site
	LiveBytes int64 // all live bytes at the end of the latest window
	LiveCount int64
	// SurvivorBytes and SurvivorCount are what the site was judged on: its
	// live tensors at least SurvivorAge windows old at the end of the
	// latest window (all live ones with SurvivorAge(0)).
	SurvivorBytes int64
	SurvivorCount int64
	// BaselineBytes survived when the growth that flagged the site began;
	// the site stops being a suspect when it falls back to them.
	BaselineBytes int64
	// GrowthPerWindow is the average growth of the survivors over the last
	// K windows, or over the run of growth that flagged a slow leak.
	GrowthPerWindow int64
	Grew            int // of the last Windows windows, how many grew
	Windows         int // K
	Since           time.Time
	SinceWindow     uint64 // the window that flagged it, counted from 1
	// HeldBy names, when the site's tensors are kept alive by extra owners
	// after their own handles were freed (a View, a Retain, a cache entry),
	// those owners by the line that made them, most handles first: the
	// line to change. Empty while the allocations' own handles hold them.
	// Filled once, when the site is flagged.
	HeldBy []Holder
}

// Watcher watches a tracker's surviving bytes per call site over windows of
// requests or time and names the sites that keep growing: leak suspects.
//
// Survivors are the live tensors at least SurvivorAge windows old: memory
// that outlived the request that made it. Memory in flight (activations, the
// KV cache of a running request), however large and however its size
// trends, is freed before it survives, so it is never judged; a slow leak
// that in-flight memory would hide stands out once it is removed.
//
// Ages are counted by the tracker's age clock, which one watcher drives:
// the first made of the tracker (or, once it stopped, the next whose window
// ends) advances the clock by one at the end of each of its windows, until
// it stops. A second watcher of
// the same tracker reads that clock without advancing it, so its ages are
// counted in the first one's windows. Each record is stamped with the clock
// and each site counts its live bytes by age (O(1) per record and release);
// a window end reads those counts (O(sites), no walk of the live set).
//
// A site becomes a suspect when, over
// the last K windows, its survivors grew in at least MostOf of them, and
// its net growth over the K windows is more than MinGrowth and more than
// everything it gave back (the sum of its one-window drops) over the
// history the watcher remembers (WatchHistory windows; while that history
// fills, what it gave back so far, scaled up to a full history).
//
// A sparse leak, one that keeps something every few windows, grows in too
// few of any K windows. A site is also a suspect (a slow leak) when its
// survivors grew in at least MostOf windows and never shrank over a run of
// at least WatchHistory windows: what outlives its request and only ever
// accumulates leaks, however little each time. Such a suspect clears when
// it falls back to its baseline or stops growing for K windows or twice its
// usual interval between steps, whichever is longer.
//
// A leak takes and never gives back. A site that swings up and down around
// a level, even slowly, gives back about as much as it takes, so its net
// growth does not beat its drops; a bounded random walk with steps as large
// as its drift is the one kind of noise that still gets flagged now and
// then (in tests, about once in 1500 windows). A leak hidden in swings
// several times its growth per window needs more windows (Windows,
// WatchHistory). Windows before the watcher started count as not grown, so
// a leak is flagged after MostOf windows at the earliest.
//
// A suspect stops being one when its survivors fall back to its baseline
// (what was live when its growth began), or when it has not grown over the
// last K windows (a plateau: whatever it holds is no longer growing).
//
// A Watcher is safe for concurrent use. It starts no goroutine except the
// one Start starts, which Stop ends.
type Watcher struct {
	tr  *Tracker
	cfg watcherConfig

	ticks        atomic.Uint64
	windows      atomic.Uint64
	suspectCount atomic.Int64

	// mu guards the per-site histories; a window end holds it while
	// sampling, so windows are judged in the order they end.
	mu       sync.Mutex
	sites    []*siteHistory // by Site.ID; nil for sites not seen yet
	suspects int

	// lifeMu guards stopping and the loop's state.
	lifeMu     sync.Mutex
	stopped    atomic.Bool
	done       chan struct{}
	running    bool
	loopExited chan struct{} // closed when the running loop returns
	inCallback atomic.Bool   // the loop is calling OnSuspect
}

// siteHistory is one site's live bytes at the end of recent windows, in a
// ring indexed by window number modulo its length: WatchHistory+1 samples
// bound WatchHistory windows.
type siteHistory struct {
	site    *Site
	suspect *Suspect // nil unless the site is a suspect now
	ring    []int64  // survivor bytes

	// The current run: the windows since its survivors last shrank.
	runStart uint64 // the window the run began at
	runBase  int64  // survivor bytes then
	runSteps int    // windows of the run in which they grew
	lastGrow uint64 // the last window in which they grew
	quiet    uint64 // a slow suspect clears after this many windows without growth
}

// lastChange returns the last window in which the site's survivors changed:
// a shrink starts a run and a growth is its latest step, so it is the later
// of the two.
func (h *siteHistory) lastChange() uint64 { return max(h.runStart, h.lastGrow) }

// siteSample is one site's figures at a window end.
type siteSample struct {
	liveCount, liveBytes         int64
	survivorCount, survivorBytes int64
}

// NewWatcher returns a watcher of tr. It samples the sites once as the
// baseline of the first window and starts nothing: with counted windows,
// call Tick; with timed windows, call Run or Start. Options are validated
// here; an invalid one returns an error matching ErrInvalidOption.
func NewWatcher(tr *Tracker, opts ...Option) (*Watcher, error) {
	if tr == nil {
		return nil, ErrNilTracker
	}
	o := options{watcher: defaultWatcherConfig()}
	if err := applyOptions(&o, forWatcher, opts); err != nil {
		return nil, err
	}
	cfg := o.watcher
	if err := cfg.finish(tr); err != nil {
		return nil, err
	}
	w := &Watcher{tr: tr, cfg: cfg, done: make(chan struct{})}
	tr.clockOwner.CompareAndSwap(nil, w)
	tr.eachSiteSample(cfg.age, func(s *Site, sample siteSample) {
		h := w.history(s)
		h.ring[0] = sample.survivorBytes
		h.runBase = sample.survivorBytes
	})
	return w, nil
}

// defaultWatcherConfig is what options change: the defaults that do not
// depend on other options (finish fills those that do).
func defaultWatcherConfig() watcherConfig {
	return watcherConfig{windows: DefaultWindows, history: DefaultWatchHistory,
		age: DefaultSurvivorAge, minGrowth: DefaultMinGrowth}
}

// finish fills the defaults that depend on other options and checks the
// options against each other.
func (c *watcherConfig) finish(tr *Tracker) error {
	if c.ticks > 0 && c.interval > 0 {
		return fmt.Errorf("%w: EveryTicks and Every both given: a window is counted or timed", ErrInvalidOption)
	}
	if c.ticks == 0 && c.interval == 0 {
		c.ticks = 1
	}
	if c.windows > c.history {
		return fmt.Errorf("%w: Windows(%d) exceeds the %d windows of WatchHistory kept", ErrInvalidOption, c.windows, c.history)
	}
	if c.mostOf == 0 {
		c.mostOf = (3*c.windows + 3) / 4
	}
	if c.mostOf > c.windows {
		return fmt.Errorf("%w: MostOf(%d) exceeds Windows(%d)", ErrInvalidOption, c.mostOf, c.windows)
	}
	if c.onSuspect == nil {
		logger := tr.cfg.logger
		name := tr.Name()
		c.onSuspect = func(s Suspect) { logSuspect(logger, name, s) }
	}
	return nil
}

// maxSuspectHolders bounds Suspect.HeldBy.
const maxSuspectHolders = 4

// nameHolders fills the newly flagged suspects' HeldBy, in the copies to
// report and in the watcher's own. It walks the live set once for all the
// flagged sites, outside the watcher's lock: flags are rare, windows are
// not.
func (w *Watcher) nameHolders(flagged []Suspect) {
	sites := make([]*Site, len(flagged))
	for i := range flagged {
		sites[i] = flagged[i].Site
	}
	for i, hs := range w.tr.holdersAt(sites, maxSuspectHolders) {
		flagged[i].HeldBy = hs
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range flagged {
		if id := s.Site.id; id < len(w.sites) && w.sites[id] != nil && w.sites[id].suspect != nil &&
			w.sites[id].suspect.SinceWindow == s.SinceWindow {
			w.sites[id].suspect.HeldBy = s.HeldBy
		}
	}
}

func holderNames(hs []Holder) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}

// logSuspect is the default OnSuspect.
func logSuspect(l *slog.Logger, tracker string, s Suspect) {
	l.Warn("tensorlife: leak suspect: surviving bytes keep growing at one call site",
		slog.String("tracker", tracker),
		slog.String("site", s.Site.String()),
		slog.Int64("growth_per_window", s.GrowthPerWindow),
		slog.Int("grew", s.Grew),
		slog.Int("windows", s.Windows),
		slog.Int64("live_bytes", s.LiveBytes),
		slog.Int64("live_count", s.LiveCount),
		slog.Int64("survivor_bytes", s.SurvivorBytes),
		slog.Any("held_by", holderNames(s.HeldBy)),
		slog.String("stack", s.Site.Stack("")))
}

// history returns the site's history, making it on first sight. A site first
// seen now had nothing live before, so its ring starts at zero. Called with
// w.mu held or before w is shared.
func (w *Watcher) history(s *Site) *siteHistory {
	for s.id >= len(w.sites) {
		w.sites = append(w.sites, nil)
	}
	h := w.sites[s.id]
	if h == nil {
		h = &siteHistory{site: s, ring: make([]int64, w.cfg.history+1)}
		w.sites[s.id] = h
	}
	return h
}

// eachSiteSample calls f with every site's live figures, read from the
// per-site counters as SiteTotals reads them, and its survivors at least age
// windows old, without sorting or allocating: a watcher samples once per
// window, often once per request.
func (t *Tracker) eachSiteSample(age int, f func(s *Site, sample siteSample)) {
	clock := t.clock.Load()
	for _, s := range t.stacks.sites() {
		if s.allocs.Load() == 0 {
			continue
		}
		// Frees first, as in SiteTotals: live figures are never negative.
		frees, freed := s.frees.Load(), s.freedBytes.Load()
		allocs, allocBytes := s.allocs.Load(), s.allocBytes.Load()
		sample := siteSample{liveCount: allocs - frees, liveBytes: allocBytes - freed}
		sample.survivorBytes, sample.survivorCount = s.ages.survivors(clock, age)
		f(s, sample)
	}
}

// Tick counts one request; every EveryTicks calls it ends a window, which
// samples every site (O(sites)) and may call OnSuspect before returning.
// After Stop it does nothing and returns ErrWatcherStopped; on a watcher
// with timed windows it returns ErrWindowKind.
func (w *Watcher) Tick() error {
	if w.stopped.Load() {
		return ErrWatcherStopped
	}
	if w.cfg.ticks == 0 {
		return ErrWindowKind
	}
	if w.ticks.Add(1)%uint64(w.cfg.ticks) == 0 {
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
	go func() {
		defer close(exited)
		_ = w.loop(context.Background()) // ends only by Stop, which reports
	}()
	return nil
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
		return nil, ErrWatcherStopped
	}
	if w.running {
		return nil, ErrWatcherRunning
	}
	w.running = true
	w.loopExited = make(chan struct{})
	exited := w.loopExited
	return exited, nil
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
// ErrWatcherStopped.
func (w *Watcher) Stop() error {
	w.lifeMu.Lock()
	if w.stopped.Load() {
		w.lifeMu.Unlock()
		return ErrWatcherStopped
	}
	w.stopped.Store(true)
	close(w.done)
	w.tr.clockOwner.CompareAndSwap(w, nil) // another watcher may drive the clock
	running, exited := w.running, w.loopExited
	w.lifeMu.Unlock()
	if running && !w.inCallback.Load() {
		<-exited
	}
	return nil
}

// Suspects returns the current leak suspects, most live bytes first.
func (w *Watcher) Suspects() []Suspect {
	w.mu.Lock()
	out := make([]Suspect, 0, w.suspects)
	for _, h := range w.sites {
		if h != nil && h.suspect != nil {
			out = append(out, *h.suspect)
		}
	}
	w.mu.Unlock()
	sortSuspects(out)
	return out
}

// SuspectCount returns how many sites are suspects now, as of the latest
// window: a counter, cheap enough for a metrics callback, where Suspects
// copies and sorts.
func (w *Watcher) SuspectCount() int { return int(w.suspectCount.Load()) }

// WindowsEnded returns how many windows have ended.
func (w *Watcher) WindowsEnded() uint64 { return w.windows.Load() }

func sortSuspects(s []Suspect) {
	slices.SortFunc(s, func(a, b Suspect) int {
		return cmp.Or(cmp.Compare(b.LiveBytes, a.LiveBytes), cmp.Compare(b.SurvivorBytes, a.SurvivorBytes),
			cmp.Compare(a.Site.id, b.Site.id))
	})
}

// endWindow samples the sites, judges those that changed lately, and
// reports the newly flagged ones after releasing the lock.
func (w *Watcher) endWindow(fromLoop bool) {
	now := time.Now()
	w.mu.Lock()
	n := w.windows.Add(1)
	if w.tr.clockOwner.Load() == w || w.tr.clockOwner.CompareAndSwap(nil, w) {
		w.tr.clock.Add(1)
	}
	var flagged []Suspect
	w.tr.eachSiteSample(w.cfg.age, func(site *Site, sample siteSample) {
		h := w.history(site)
		cur := sample.survivorBytes
		if n <= w.cfg.warmUp {
			// Still warming up: the whole history is the latest sample.
			for i := range h.ring {
				h.ring[i] = cur
			}
			h.runStart, h.runBase, h.runSteps = n, cur, 0
			return
		}
		prev := h.ring[(n-1)%uint64(len(h.ring))]
		h.ring[n%uint64(len(h.ring))] = cur
		switch {
		case cur < prev:
			h.runStart, h.runBase, h.runSteps = n, cur, 0
		case cur > prev:
			h.runSteps++
			h.lastGrow = n
		}
		// A site unchanged for K windows has not grown in them: it cannot
		// be flagged, and a suspect among them clears on the plateau rule.
		if h.suspect == nil && n-h.lastChange() >= uint64(w.cfg.windows) {
			return
		}
		if s, ok := w.judge(h, sample, n, now); ok {
			flagged = append(flagged, s)
		}
	})
	w.suspectCount.Store(int64(w.suspects))
	w.mu.Unlock()

	if len(flagged) == 0 {
		return
	}
	sortSuspects(flagged)
	w.nameHolders(flagged)
	if fromLoop {
		w.inCallback.Store(true)
		defer w.inCallback.Store(false)
	}
	for _, s := range flagged {
		if w.stopped.Load() {
			return // nothing is reported after Stop has returned
		}
		w.tr.Note(EventLeakSuspect, s.Site, s.LiveBytes)
		w.cfg.onSuspect(s)
	}
}

// judge applies the suspect rules to one site at window n, whose figures
// at the window's end are sample, and reports whether the site became a
// suspect now. Called with w.mu held.
func (w *Watcher) judge(h *siteHistory, sample siteSample, n uint64, now time.Time) (Suspect, bool) {
	size := uint64(len(h.ring))
	at := func(i uint64) int64 { return h.ring[i%size] }
	judged := n - w.cfg.warmUp // windows since the warm-up
	span := min(uint64(w.cfg.windows), judged)
	grew := 0
	for i := n - span + 1; i <= n; i++ {
		if at(i) > at(i-1) {
			grew++
		}
	}
	// What the site gave back over the history it has; while the history
	// fills, scaled up to a full one, so that a few early windows of a
	// swinging site do not pass for a leak.
	seen := min(uint64(w.cfg.history), judged)
	var gaveBack int64
	for i := n - seen + 1; i <= n; i++ {
		gaveBack += max(at(i-1)-at(i), 0)
	}
	bar := float64(gaveBack) * float64(w.cfg.history) / float64(seen)
	live, start := at(n), at(n-span)
	net := live - start

	if s := h.suspect; s != nil {
		plateau := net <= 0
		if h.quiet > 0 { // a slow suspect
			plateau = n-h.lastGrow >= h.quiet
		}
		if live <= s.BaselineBytes || plateau {
			h.suspect = nil
			w.suspects--
			return Suspect{}, false
		}
		s.LiveBytes, s.LiveCount = sample.liveBytes, sample.liveCount
		s.SurvivorBytes, s.SurvivorCount = live, sample.survivorCount
		if h.quiet == 0 {
			s.Grew, s.GrowthPerWindow = grew, net/int64(span)
		}
		return Suspect{}, false
	}
	fast := grew >= w.cfg.mostOf && net > w.cfg.minGrowth && float64(net) > bar
	// A slow leak: grew just now, in at least MostOf windows of a run of a
	// whole history that never shrank.
	run := n - h.runStart
	slow := !fast && h.lastGrow == n && h.runSteps >= w.cfg.mostOf && run >= uint64(w.cfg.history) &&
		live > h.runBase
	if !fast && !slow {
		return Suspect{}, false
	}
	s := &Suspect{Site: h.site, LiveBytes: sample.liveBytes, LiveCount: sample.liveCount,
		SurvivorBytes: live, SurvivorCount: sample.survivorCount, BaselineBytes: start,
		GrowthPerWindow: net / int64(span), Grew: grew, Windows: w.cfg.windows, Since: now, SinceWindow: n}
	h.quiet = 0
	if slow {
		interval := (run + uint64(h.runSteps) - 1) / uint64(h.runSteps)
		h.quiet = max(uint64(w.cfg.windows), 2*interval)
		s.BaselineBytes = h.runBase
		s.GrowthPerWindow = (live - h.runBase) / int64(run)
	}
	h.suspect = s
	w.suspects++
	return *s, true
}
