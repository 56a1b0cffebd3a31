package oomdump

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/internal/option"
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
	tr  *track.Tracker
	dir string
	cfg config
	now func() time.Time // the clock; tests replace it

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
	Panics  int64 // panics recovered from OnDump and from writing a dump (a part's, read by the summary, is the tracker's: Totals.PartPanics)
}

// New returns a Dumper that writes tr's memory into dir when it hears of an
// out-of-memory error. dir is made, with its parents, when the first dump
// is written, not before. Where dir exists, New removes the temporary
// files that writers which died in the middle of a dump left there (a
// process killed while writing), and only those: see "Files of a dump cut
// short" in the package doc. Hand its OutOfMemory method to
// pool.OnOutOfMemory. Its summary shows the pools, caches, devices and
// watchers made with tr (they attach themselves to it), whether they are
// made before or after the Dumper.
//
// A nil tracker is an error matching track.ErrNilTracker; an empty dir, a nil
// option or an invalid value one matching ErrInvalidOption.
func New(tr *track.Tracker, dir string, opts ...Option) (*Dumper, error) {
	if tr == nil {
		return nil, track.ErrNilTracker
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory", ErrInvalidOption)
	}
	cfg := config{interval: DefaultInterval}
	if err := option.Apply(&cfg, opts, Option.apply, ErrInvalidOption); err != nil {
		return nil, err
	}
	atomicfile.Sweep(dir) // housekeeping: a dumper that cannot sweep still dumps
	return &Dumper{tr: tr, dir: dir, cfg: cfg, now: time.Now}, nil
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
	job := dumpJob{Dump: Dump{Time: now, OOM: e}, seq: d.seq}
	d.mu.Unlock()

	// The live set as it was when the allocation failed: the failing
	// request frees what it held as soon as the error reaches it. What is
	// taken here is a copy of the counters the default profile is read
	// from, by site and shape (no label, no walk of the live set, a shard's
	// lock held only to copy the pointers of its few special records); the
	// snapshot is built from it on the dumper's goroutine. A dump must not make the
	// failing allocation wait for a walk of a live set that is, by then, as
	// large as it gets.
	job.counts = d.tr.Books().CopyCounts()
	go d.write(job, done)
}

// dumpJob is what the dumper's goroutine writes.
type dumpJob struct {
	Dump
	seq    int
	counts func() *track.Snapshot // the live set when the allocation failed
}

// write writes one dump's files, then calls OnDump, records the dump and
// lets Close and Wait return. It runs on a goroutine of its own, one per
// dump. Nothing that goroutine runs may end the process: a panic there
// (in OnDump, or in the sources' methods the summary calls) would, so each
// is recovered, counted and logged, and the dump is recorded whatever
// happened, or Close and Wait would wait for ever.
func (d *Dumper) write(job dumpJob, done chan struct{}) {
	dump := job.Dump
	var panics int64
	defer func() {
		d.mu.Lock()
		if dump.Err != nil {
			d.stats.Failed++
		}
		d.stats.Panics += panics
		d.lastErr, d.lastOne, d.hasLast = dump.Err, dump, true
		d.writing = nil
		d.mu.Unlock()
		close(done)
	}()
	if v, stack, ok := d.guard(func() { dump.Err = d.writeFiles(&job, &dump.Files) }); ok {
		panics++
		dump.Err = fmt.Errorf("%w while writing dump %d: %s", ErrPanicked, job.seq, format.Value(v, maxPanicText))
		d.logPanic("writing the dump", job.seq, v, stack)
	}
	if d.cfg.onDump == nil {
		return
	}
	if v, stack, ok := d.guard(func() { d.cfg.onDump(dump) }); ok {
		panics++
		d.logPanic("its OnDump callback", job.seq, v, stack)
	}
}

// guard runs f and reports the value and stack of a panic in it. A
// runtime.Goexit in f ends the dumper's goroutine, but write's deferred
// bookkeeping still runs.
func (d *Dumper) guard(f func()) (v any, stack []byte, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			v, stack, panicked = r, debug.Stack(), true
		}
	}()
	f()
	return nil, nil, false
}

// maxPanicText bounds what a dump's error and log repeat of a panic's
// value (format.Value: valid UTF-8, cut with "…").
const maxPanicText = 256

// logPanic logs a panic recovered from where while dump seq was handled.
func (d *Dumper) logPanic(where string, seq int, v any, stack []byte) {
	d.tr.Logger().Error("tensorlife: an out-of-memory dump recovered a panic in "+where,
		slog.String("tracker", d.tr.Name()), slog.Int("dump", seq), slog.String("panic", format.Value(v, maxPanicText)),
		slog.String("stack", string(stack)))
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
	if err := put(path, pprofexport.WriteFile(path, job.counts())); err != nil {
		return err
	}
	path = prefix + ".summary.txt"
	if err := put(path, atomicfile.Write(path, func(w io.Writer) error { return d.writeSummary(w, job) })); err != nil {
		return err
	}
	topts := []timeline.Option{timeline.Title(title(d.tr.Name(), job.Time))}
	if job.OOM != nil && job.OOM.Limit > 0 {
		topts = append(topts, timeline.BudgetLine(job.OOM.Limit))
	}
	if job.OOM != nil && job.OOM.Reserved > 0 {
		// Beside the tensor bytes: the allocator's rounding and cache are
		// what stands between them and the budget line.
		topts = append(topts, timeline.Reserved(job.OOM.Reserved))
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
	return report.WriteSummary(w, d.tr)
}

// fileName is the name every file of a dump starts with: the tracker's
// name (characters other than letters, digits, '.', '_' and '-' made '_',
// a long one cut, see shorten), "oom", the time in UTC to the millisecond
// and the dump's number, so that names sort by time and two dumps of one
// millisecond differ.
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
	return shorten(name, tracker, maxNameBytes) + "-oom-" + t.UTC().Format("20060102T150405.000Z") + "-" + strconv.Itoa(seq)
}

// maxNameBytes bounds the tracker's part of a dump's file names. Systems
// refuse names over 255 bytes (NAME_MAX), and the rest of the longest one
// ("-oom-", the time, the number, ".summary.txt") takes under 60; 100
// leaves room and still reads as the tracker's name.
const maxNameBytes = 100

// title is the timeline's title: the tracker's name, cut where needed
// (shorten), and when memory ran out, within timeline.MaxTitle whatever
// the name's length.
func title(tracker string, t time.Time) string {
	suffix := ": out of memory at " + t.UTC().Format(time.RFC3339)
	return shorten(tracker, tracker, timeline.MaxTitle-len(suffix)) + suffix
}

// shorten returns s, or, when it is longer than max bytes, its start cut
// at a character boundary, then "~" and a hash of full, the name s stands
// for: two long names that share their first bytes still make different
// files and titles, and the same name always the same ones. max must leave
// room for the hash: 17 bytes.
func shorten(s, full string, max int) string {
	if len(s) <= max {
		return s
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(full)) // a hash never fails to write
	sum := fmt.Sprintf("~%016x", h.Sum64())
	n := max - len(sum)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + sum
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
