package oomdump

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

// Dumper writes a dump of a tracker's memory into a directory when it hears
// of an out-of-memory error (OutOfMemory), at most once per Interval. Make
// one with New and Close it when done; it must not be copied. It is safe
// for concurrent use.
type Dumper struct {
	tr      *track.Tracker
	dir     string
	cfg     config
	sources atomic.Pointer[report.Sources]
	now     func() time.Time // the clock; tests replace it

	mu      sync.Mutex
	closed  bool
	last    time.Time     // when the last dump started; zero before the first
	writing chan struct{} // closed when the dump being written is done; nil when none is
	seq     int
	stats   Stats
	lastErr error // the last finished dump's error
	lastOne Dump
	hasLast bool
}

// Dump is one dump as written.
type Dump struct {
	// Time is when the out-of-memory error was heard; the file names
	// carry it.
	Time time.Time
	// OOM is the error that made the dump; nil when OutOfMemory was
	// called with nil.
	OOM *tensor.OOMError
	// Files are the paths written, in order: the profile, the summary,
	// then, with the tracker's history on, the trace and the picture.
	Files []string
	// Err is what stopped the dump, if anything; the files listed were
	// written before it and are complete.
	Err error
}

// Stats count what a Dumper heard.
type Stats struct {
	Dumps   int64 // dumps started
	Failed  int64 // dumps that stopped on an error
	Skipped int64 // out-of-memory errors heard within Interval of a dump, or while one was being written
}

// New returns a Dumper that writes tr's memory into dir when it hears of an
// out-of-memory error. dir is made, with its parents, when the first dump
// is written, not before. Hand its OutOfMemory method to
// pool.OnOutOfMemory, and the figures of the pools and caches it should
// summarize to SetSources once they are built.
//
// A nil tracker is an error matching ErrNilTracker; an empty dir, a nil
// option or an invalid value one matching ErrInvalidOption.
func New(tr *track.Tracker, dir string, opts ...Option) (*Dumper, error) {
	if tr == nil {
		return nil, ErrNilTracker
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory", ErrInvalidOption)
	}
	cfg := config{interval: DefaultInterval}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	return &Dumper{tr: tr, dir: dir, cfg: cfg, now: time.Now}, nil
}

// SetSources sets the pools, caches, devices and watcher whose figures the
// summary of each later dump shows (report.WithSources). It is a method
// rather than an option because the pools it names are built with
// OutOfMemory as their hook, after the Dumper. Sources that do not fit the
// tracker (report.Sources.Validate) are an error matching ErrInvalidOption
// and report.ErrInvalidOption, and leave the previous ones in place.
func (d *Dumper) SetSources(src report.Sources) error {
	if err := src.Validate(d.tr); err != nil {
		return fmt.Errorf("%w: SetSources: %w", ErrInvalidOption, err)
	}
	d.sources.Store(&src)
	return nil
}

// OutOfMemory hears of an out-of-memory error, the function to hand to
// pool.OnOutOfMemory. Unless a dump started less than Interval ago, one is
// being written, or the Dumper is closed, it starts a dump: it takes a
// snapshot of the live set on the calling goroutine, then returns, and the
// dumper's goroutine writes the files. e may be nil (an error of another
// kind that still calls for a dump); it is read, never changed.
func (d *Dumper) OutOfMemory(e *tensor.OOMError) {
	now := d.now()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	if d.writing != nil || (!d.last.IsZero() && now.Sub(d.last) < d.cfg.interval) {
		d.stats.Skipped++
		d.mu.Unlock()
		return
	}
	d.last = now
	d.seq++
	d.stats.Dumps++
	done := make(chan struct{})
	d.writing = done
	job := dumpJob{Dump: Dump{Time: now, OOM: e}, seq: d.seq, sources: d.sources.Load()}
	d.mu.Unlock()

	// The live set as it was when the allocation failed: the failing
	// request frees what it held as soon as the error reaches it. What is
	// taken here is a copy of the counters the default profile is read
	// from, by site and shape (no label, no walk of the live set, no shard
	// lock held longer than its few special records take); the snapshot
	// is built from it on the dumper's goroutine. A dump must not make the
	// failing allocation wait for a walk of a live set that is, by then, as
	// large as it gets.
	job.counts = d.tr.Counts()
	go d.write(job, done)
}

// dumpJob is what the dumper's goroutine writes.
type dumpJob struct {
	Dump
	seq     int
	sources *report.Sources
	counts  *track.Counts // the live set when the allocation failed
}

// write writes one dump's files, then records it, calls OnDump and lets
// Close and Wait return. It runs on a goroutine of its own, one per dump.
func (d *Dumper) write(job dumpJob, done chan struct{}) {
	dump := job.Dump
	dump.Err = d.writeFiles(&job, &dump.Files)
	if d.cfg.onDump != nil {
		d.cfg.onDump(dump)
	}
	d.mu.Lock()
	if dump.Err != nil {
		d.stats.Failed++
	}
	d.lastErr, d.lastOne, d.hasLast = dump.Err, dump, true
	d.writing = nil
	d.mu.Unlock()
	close(done)
}

// writeFiles writes the files of job in order, appending each path to
// files once it is complete, and stops at the first error.
func (d *Dumper) writeFiles(job *dumpJob, files *[]string) error {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("oomdump: %w", err)
	}
	prefix := filepath.Join(d.dir, fileName(d.tr.Name(), job.Time, job.seq))
	put := func(path string, err error) error {
		if err != nil {
			return fmt.Errorf("oomdump: %w", err)
		}
		*files = append(*files, path)
		return nil
	}
	path := prefix + ".pb.gz"
	if err := put(path, pprofexport.WriteFile(path, job.counts.Snapshot())); err != nil {
		return err
	}
	path = prefix + ".summary.txt"
	if err := put(path, atomicfile.Write(path, func(w io.Writer) error { return d.writeSummary(w, job) })); err != nil {
		return err
	}
	topts := []timeline.Option{timeline.Title(fmt.Sprintf("%s: out of memory at %s", d.tr.Name(),
		job.Time.UTC().Format(time.RFC3339)))}
	if job.OOM != nil && job.OOM.Limit > 0 {
		topts = append(topts, timeline.BudgetLine(job.OOM.Limit))
	}
	tl, err := timeline.Build(d.tr, topts...)
	if errors.Is(err, track.ErrHistoryOff) {
		return nil // no history, no timeline: the dump is complete
	}
	if err != nil {
		return fmt.Errorf("oomdump: %w", err)
	}
	path = prefix + ".trace.json"
	if err := put(path, tl.WriteTraceFile(path)); err != nil {
		return err
	}
	path = prefix + ".svg"
	return put(path, tl.WriteSVGFile(path))
}

// writeSummary writes the summary file: what failed, then the summary.
func (d *Dumper) writeSummary(w io.Writer, job *dumpJob) error {
	what := "out-of-memory error (no detail given)"
	if job.OOM != nil {
		what = job.OOM.Error()
	}
	if _, err := fmt.Fprintf(w, "tensorlife out-of-memory dump %d of tracker %q at %s\n\n%s\n\n", job.seq,
		d.tr.Name(), job.Time.UTC().Format(time.RFC3339Nano), what); err != nil {
		return err
	}
	var opts []report.Option
	if job.sources != nil {
		opts = append(opts, report.WithSources(*job.sources))
	}
	return report.WriteSummary(w, d.tr, opts...)
}

// fileName is the name every file of a dump starts with: the tracker's
// name (characters other than letters, digits, '.', '_' and '-' made '_'),
// "oom", the time in UTC to the millisecond and the dump's number, so that
// names sort by time and two dumps of one millisecond differ.
func fileName(tracker string, t time.Time, seq int) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, tracker)
	if name == "" || strings.Trim(name, ".") == "" {
		name = "tensorlife"
	}
	return name + "-oom-" + t.UTC().Format("20060102T150405.000Z") + "-" + strconv.Itoa(seq)
}

// Wait waits until no dump is being written and returns the last finished
// dump's error (nil when it succeeded or none was written).
func (d *Dumper) Wait() error {
	d.mu.Lock()
	done := d.writing
	d.mu.Unlock()
	if done != nil {
		<-done
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastErr
}

// Close stops the Dumper: out-of-memory errors heard from now on are
// ignored. It waits for the dump being written, if any, and returns the
// last dump's error, so a program that exits after an out-of-memory error
// knows whether its dump is on disk. Closing twice is harmless.
func (d *Dumper) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return d.Wait()
}

// Last returns the last dump written, or false before the first one
// finishes.
func (d *Dumper) Last() (Dump, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastOne, d.hasLast
}

// Stats returns what the Dumper has heard and written so far.
func (d *Dumper) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}
