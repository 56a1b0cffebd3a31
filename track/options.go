package track

import (
	"log/slog"
	"time"

	"github.com/tensorlife/tensorlife/internal/option"
)

// Option configures New. Options are immutable and may be shared.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// applyOptions applies opts onto c.
func applyOptions(c *config, opts []Option) error {
	return option.Apply(c, opts, Option.apply, ErrInvalidOption)
}

// Bounds of the tracker options.
const (
	// maxSitesLimit bounds MaxSites.
	maxSitesLimit = 1 << 24
	// maxHistoryEvents bounds KeepHistory: about 64 bytes an event, 256 MiB
	// at the bound.
	maxHistoryEvents = 1 << 22
)

type config struct {
	name          string
	maxSites      int
	onLeak        func(LeakReport)
	reclaimLeaks  bool
	logger        *slog.Logger
	historyEvents int
	framePointers bool
	helpers       *helperRules     // HelperFunctions; nil if none
	clock         func() time.Time // Clock; nil reads time.Now
	kindKeys      []string         // RequestKinds; nil keeps no statistics
}

func defaultConfig() config {
	return config{
		name:          "tensorlife",
		maxSites:      4096,
		reclaimLeaks:  true,
		logger:        slog.Default(),
		framePointers: true,
	}
}

// Clock sets the tracker's clock (default time.Now), which must not go back:
// a test passes its own to age tensors without waiting.
func Clock(now func() time.Time) Option {
	return optionFunc(option.NotNil("Clock", now, func(c *config, now func() time.Time) { c.clock = now }))
}

// Name names the tracker in logs and reports.
func Name(name string) Option {
	return optionFunc(option.NotEmpty("Name", "a name", name, func(c *config, name string) { c.name = name }))
}

// MaxSites bounds the stack table at n stacks, 1..1<<24 (default 4096), at
// about 48 B each, allocated by New; further stacks count as overflow.
func MaxSites(n int) Option {
	return optionFunc(option.Within("MaxSites", n, 1, maxSitesLimit, func(c *config, n int) { c.maxSites = n }))
}

// OnLeak sets what reports a dropped handle (default: a warning through
// the tracker's Logger). The collector finds the handle on the runtime's
// cleanup goroutine, which never runs f nor waits for it: the report is
// queued, and f is called with each in order on a goroutine of
// tensorlife's, under recover (a panic is counted in Totals.PartPanics and
// logged the first time; a runtime.Goexit ends nothing but that call). An
// f that blocks holds back its own reports only: once 4096 wait for it, a
// further report is not given to it, and is counted in
// Totals.LeakReportsLost and logged once; every leak is counted
// (Totals.GCLeaks) all the same. Books.WaitLeaks waits until the reports
// made so far are delivered.
func OnLeak(f func(LeakReport)) Option {
	return optionFunc(option.NotNil("OnLeak", f, func(c *config, f func(LeakReport)) { c.onLeak = f }))
}

// ReclaimLeaks frees a leaked tensor once reported (default true).
func ReclaimLeaks(reclaim bool) Option {
	return optionFunc(option.Set(reclaim, func(c *config, on bool) { c.reclaimLeaks = on }))
}

// Logger sets where the tracker, and what is made with it, reports what
// no caller is there to hear (default slog.Default()): the default leak
// report, the panics recovered from parts (NotePanic), and those of the
// parts themselves (a pool's OnOutOfMemory hook, a watcher's default
// OnSuspect report and its callback's panics, a dump's panics, a mask
// Builder's rebuild report). Tracker.Logger returns it.
func Logger(l *slog.Logger) Option {
	return optionFunc(option.NotNil("Logger", l, func(c *config, l *slog.Logger) { c.logger = l }))
}

// Logger returns the tracker's logger (the Logger option's, default
// slog.Default()): what is made with the tracker logs through it.
func (t *Tracker) Logger() *slog.Logger { return t.cfg.logger }

// KeepHistory keeps the last n events, 1..1<<22, at about 80 B each,
// allocated by New (Tracker.History); older ones are counted as dropped.
func KeepHistory(n int) Option {
	return optionFunc(option.Within("KeepHistory", n, 1, maxHistoryEvents, func(c *config, n int) { c.historyEvents = n }))
}

// FramePointers chooses the frame-pointer walk (default, about a twentieth
// of runtime.Callers; TENSORLIFE_STACK=callers turns it off) or Callers alone.
func FramePointers(on bool) Option {
	return optionFunc(option.Set(on, func(c *config, on bool) { c.framePointers = on }))
}
