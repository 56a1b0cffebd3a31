package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/oomdump"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/devflag"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// session is one run: one tracker over the devices, on each device a pool
// with a budget, a mask builder and a prompt-mask cache, the growth watcher,
// and the agent.
type session struct {
	o       options
	devs    []devflag.Device
	tr      *track.Tracker
	lanes   []poolLane // one per device built so far
	watcher *watch.Watcher
	dumper  *oomdump.Dumper // nil without -oom-dir
	agent   *agent

	mu           sync.Mutex
	firstRebuild *mask.Rebuild
	firstSuspect *watch.Suspect
	suspectAt    int // requests served when the first suspect was named
	served       int
}

func newSession(o options) (*session, error) {
	s := &session{o: o}
	var err error
	if s.devs, err = devflag.OpenAll(o.device, o.capacity); err != nil {
		return nil, err
	}
	topts := []track.Option{track.Name("agentleak"), track.OnLeak(func(track.LeakReport) {}), track.RequestKinds("prompt")}
	switch {
	case o.timeline != "" || o.trace != "":
		topts = append(topts, track.KeepHistory(1<<20))
	case o.oomDir != "":
		// Enough for the dump's timeline to show the whole run up to the
		// out-of-memory error the leak runs into near request 420.
		topts = append(topts, track.KeepHistory(1<<16))
	}
	if o.clockStep > 0 {
		topts = append(topts, track.Clock((&stepClock{now: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC), step: o.clockStep}).Now))
	}
	if s.tr, err = track.New(topts...); err != nil {
		return nil, errors.Join(err, s.close())
	}
	if o.oomDir != "" {
		// Made before the pools, which hand it their out-of-memory errors.
		if s.dumper, err = oomdump.New(s.tr, o.oomDir); err != nil {
			return nil, errors.Join(err, s.close())
		}
	}
	lanes := make([]lane, 0, len(s.devs))
	for _, dev := range s.devs {
		l, err := s.newLane(dev)
		if err != nil {
			return nil, errors.Join(err, s.close()) // newLane closed its own pool
		}
		s.lanes = append(s.lanes, l)
		lanes = append(lanes, l.lane)
	}
	s.watcher, err = watch.New(s.tr, watch.OnSuspect(func(sus watch.Suspect) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.firstSuspect == nil {
			s.firstSuspect, s.suspectAt = &sus, s.served
		}
	}))
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	s.agent = newAgent(o.workload, lanes)
	return s, nil
}

// poolLane is a lane as the session keeps it: with the pool its allocator
// is, which the session closes.
type poolLane struct {
	lane
	pool *pool.Pool
}

// newLane builds dev's pool, mask builder and prompt-mask cache, all on the
// one tracker. With several devices the cache's name says its device. On
// error the pool is closed.
func (s *session) newLane(dev devflag.Device) (_ poolLane, err error) {
	popts := []pool.Option{pool.Tracker(s.tr), pool.Budget(s.o.budget)}
	if s.dumper != nil {
		popts = append(popts, pool.OnOutOfMemory(s.dumper.OutOfMemory))
	}
	p, err := pool.New(dev, popts...)
	if err != nil {
		return poolLane{}, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
		}
	}()
	masks, err := mask.NewBuilder(p, mask.DType(tensor.Float32), mask.OnRebuild(func(r mask.Rebuild) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.firstRebuild == nil {
			s.firstRebuild = &r
		}
	}))
	if err != nil {
		return poolLane{}, err
	}
	name := "prompt-masks"
	if len(s.devs) > 1 {
		name = "prompts@" + dev.Name() // short: the summary shows 16 columns of a name
	}
	prompts, err := mask.NewCache(mask.CacheTracker(s.tr), mask.CacheName(name), mask.MaxBytes(1<<20), mask.MaxEntries(16))
	if err != nil {
		return poolLane{}, err
	}
	return poolLane{lane: lane{alloc: p, masks: masks, prompts: prompts}, pool: p}, nil
}

// rebuilds is how many masks were rebuilt, over every device.
func (s *session) rebuilds() int64 {
	var n int64
	for _, l := range s.lanes {
		n += l.masks.Rebuilds()
	}
	return n
}

// result is how the run ended.
type result struct {
	served int
	err    error // what stopped the run early, if anything (an OOM)
}

// serve runs the requests, ticking the watcher after each.
func (s *session) serve(ctx context.Context, p *progress) result {
	var res result
	for id := range s.o.requests {
		if err := s.agent.serve(ctx, id); err != nil {
			res.err = fmt.Errorf("request %d: %w", id, err)
			break
		}
		s.mu.Lock()
		s.served++
		s.mu.Unlock()
		res.served++
		if err := s.watcher.Tick(); err != nil {
			res.err = err
			break
		}
		p.update(res.served, s.tr.Totals().LiveBytes)
	}
	p.done()
	return res
}

// report prints, in order: what the mask builder saw, what the watcher
// saw, how the run ended, the memory summary, and the files written.
func (s *session) report(w io.Writer, res result) error {
	variant := "leaky: a new mask every step, kept in an unbounded map"
	if s.o.fixed {
		variant = "fixed: one growable mask per request, a bounded prompt-mask cache"
	}
	fmt.Fprintf(w, "agentleak (%s)\n", variant)
	fmt.Fprintf(w, "served %d of %d requests, %d tokens each, pool budget %s\n\n",
		res.served, s.o.requests, s.o.tokens, report.Bytes(s.o.budget))

	s.mu.Lock()
	rebuild, suspect, suspectAt := s.firstRebuild, s.firstSuspect, s.suspectAt
	s.mu.Unlock()
	if rebuild != nil {
		fmt.Fprintf(w, "mask rebuilt %d times, first in request %s, at\n%s\n  %s\n\n",
			s.rebuilds(), rebuild.Labels, where(rebuild.Location), mask.Advice)
	}
	if suspect != nil {
		fmt.Fprintf(w, "leak suspect after %d requests: growing %s per request, %s live in %d tensors, at\n%s\n",
			suspectAt, report.Bytes(suspect.GrowthPerWindow), report.Bytes(suspect.LiveBytes),
			suspect.LiveCount, where(suspect.Site.Location()))
		if suspect.RunsOutIn > 0 {
			fmt.Fprintf(w, "  %s: the %s on %s, %s left\n", suspect.Forecast(),
				suspect.HeadroomOf, suspect.Device, report.Bytes(suspect.Headroom))
		}
		fmt.Fprintf(w, "%s\n", wrap("  ", watch.Advice+".", 100))
	} else {
		fmt.Fprintf(w, "no leak suspect: no call site kept growing\n\n")
	}
	if res.err != nil {
		fmt.Fprintf(w, "the run stopped:\n%s\n\n", indent(res.err.Error()))
	}

	err := report.WriteSummary(w, s.tr, report.TopSites(5))
	fmt.Fprintln(w)
	return errors.Join(err, s.writeFiles(w))
}

// close frees everything: the leaked masks (as a shutdown would), the
// caches, and the pools, which report any block still in use. It closes
// only what was built, so a session that failed halfway closes too.
func (s *session) close() error {
	var errs []error
	if s.dumper != nil {
		errs = append(errs, s.dumper.Close()) // waits for a dump being written
	}
	if s.agent != nil {
		errs = append(errs, s.agent.close())
	}
	for _, l := range s.lanes {
		errs = append(errs, l.prompts.Close())
	}
	if s.watcher != nil {
		errs = append(errs, s.watcher.Stop())
	}
	for _, l := range s.lanes {
		errs = append(errs, l.pool.Close())
	}
	return errors.Join(append(errs, devflag.CloseAll(s.devs))...)
}

// where renders a frame on two indented lines, the file relative to the
// working directory when it is below it, so lines stay short.
func where(f track.Frame) string {
	file := f.File
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, file); err == nil && !strings.HasPrefix(rel, "..") {
			file = rel
		}
	}
	return fmt.Sprintf("  %s\n    %s:%d", f.Function, file, f.Line)
}

// wrap fills text into lines of at most width columns, each begun by
// prefix.
func wrap(prefix, text string, width int) string {
	var b strings.Builder
	line := prefix
	for _, word := range strings.Fields(text) {
		if line != prefix && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = prefix
		}
		if line != prefix {
			line += " "
		}
		line += word
	}
	return b.String() + line + "\n"
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// stepClock is the tracker clock of -clock-step: it moves by step at each
// reading, so that the events of a run, which is the same at every run,
// get the same times.
type stepClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// Now returns the clock's time and moves it on.
func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}
