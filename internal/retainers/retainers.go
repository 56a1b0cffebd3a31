package retainers

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/heapfence"
)

// Defaults of Config.
const (
	DefaultMaxPaths     = 32
	DefaultMaxDepth     = 64
	DefaultMaxDumpBytes = 1 << 30
	DefaultTimeout      = 10 * time.Second
	DefaultMaxWait      = 250 * time.Millisecond
)

// Config bounds a search. Zero fields take the defaults above.
type Config struct {
	// MaxPaths is the most paths named: a target past it is reported as
	// not searched.
	MaxPaths int
	// MaxDepth is the most heap objects on a path: a target reachable only
	// through a longer chain is reported as without a path.
	MaxDepth int
	// MaxDumpBytes caps the dump: when the heap is larger than this
	// (estimated as 1.4 times the heap's in-use spans and stacks) the
	// dump is not written; a dump that comes out larger is not read.
	MaxDumpBytes int64
	// Timeout bounds the reading of the dump and the binary, the search
	// and the naming (the dump itself cannot be interrupted once begun).
	Timeout time.Duration
	// MaxWait is how long to wait for goroutines in system calls or cgo
	// calls to return before giving up (ErrBusy).
	MaxWait time.Duration
	// Own lists packages (import paths) whose frames at the top of the
	// calling goroutine's stack hold the targets only because they are
	// looking for them: those frames are not roots.
	Own []string

	// unguarded writes the dump even with goroutines in system
	// calls: for the test that shows the hazard, nothing else.
	unguarded bool
	// noBinary names paths as if the executable had no symbols and no
	// DWARF: for the test of what a stripped binary prints.
	noBinary bool
}

func (c Config) withDefaults() Config {
	if c.MaxPaths <= 0 {
		c.MaxPaths = DefaultMaxPaths
	}
	if c.MaxDepth <= 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	c.MaxDepth = min(c.MaxDepth, 1<<15)
	if c.MaxDumpBytes <= 0 {
		c.MaxDumpBytes = DefaultMaxDumpBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	return c
}

// Result is what a search found.
type Result struct {
	// Paths holds, for each target, its shortest path from a root; Found
	// says which were found (a target not found has no path from a root
	// within MaxDepth, is not in the heap, or is past MaxPaths).
	Paths []Path
	Found []bool
	// Note says, in one paragraph, what the search could not do or name:
	// a binary without symbols or DWARF (with the flag to rerun with), a
	// bound that was reached, targets without a path and why that can be.
	// Empty when there is nothing to say.
	Note string
	// Pause is how long the world was stopped: the heap dump's own
	// duration. Total is the whole search, dump included.
	Pause, Total time.Duration
	// DumpBytes is the size of the dump; Objects the heap objects in it.
	DumpBytes int64
	Objects   int
}

// ErrNotTest means a search was asked for outside a test binary: the dump
// stops the world for as long as it takes to write the heap, which no
// service should do while it serves.
var ErrNotTest = errors.New("retainers: retainer search runs in test binaries only")

// ErrTooLarge means the heap is over Config.MaxDumpBytes; a *TooLargeError
// has the figures.
var ErrTooLarge = errors.New("retainers: heap too large to dump")

// TooLargeError is a heap over the dump's cap.
type TooLargeError struct {
	Bytes, Limit int64
	// Estimated says Bytes is the estimate made before dumping, not the
	// size of a dump written.
	Estimated bool
}

func (e *TooLargeError) Error() string {
	what := "the heap dump is"
	if e.Estimated {
		what = "the heap dump would be about"
	}
	return fmt.Sprintf("retainers: %s %d bytes, over the %d-byte cap", what, e.Bytes, e.Limit)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ErrInvalidTarget means a target is not a non-nil pointer.
var ErrInvalidTarget = errors.New("retainers: a target must be a non-nil pointer")

// Find writes a heap dump of the process, and returns, for each target, the
// shortest chain of references from a root (a package variable, a
// goroutine's frame, a finalizer) to it, named as far as the executable's
// symbols and DWARF allow. targets are pointers to heap objects; the slice
// keeps them reachable, and so unmoved and unfreed, until the dump is
// written, and the frames of the calling goroutine that belong to this
// package, the runtime and cfg.Own are not roots, so the caller's own hold
// on them is not a path.
//
// Find must only run in tests: it returns ErrNotTest elsewhere. It stops
// the world for the dump (tens of milliseconds on a test's heap), holds off
// tensorlife's device calls meanwhile (heapfence.HoldDevices), and refuses
// with a *BusyError while goroutines are in system calls or cgo calls,
// which can crash a dump on Go 1.26 (see the package documentation).
//
// Find is safe to call from several goroutines; calls take turns.
func Find(targets []any, cfg Config) (*Result, error) {
	if !inTestBinary() {
		return nil, ErrNotTest
	}
	return find(targets, cfg)
}

// inTestBinary reports whether the process is a test binary; this
// package's tests swap it.
var inTestBinary = testing.Testing

// findMu makes searches take turns: a dump is one stop of the world.
var findMu = make(chan struct{}, 1)

func find(targets []any, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	start := time.Now()
	addrs := make([]uint64, len(targets))
	for i, t := range targets {
		v := reflect.ValueOf(t)
		if !v.IsValid() || (v.Kind() != reflect.Pointer && v.Kind() != reflect.UnsafePointer) || v.IsNil() {
			return nil, fmt.Errorf("%w: target %d is %T", ErrInvalidTarget, i, t)
		}
		addrs[i] = uint64(v.Pointer())
	}
	pinned := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(targets))))
	findMu <- struct{}{}
	defer func() { <-findMu }()

	if est := estimateDump(); est > cfg.MaxDumpBytes {
		return nil, &TooLargeError{Bytes: est, Limit: cfg.MaxDumpBytes, Estimated: true}
	}
	buf, pause, err := writeDump(cfg)
	runtime.KeepAlive(targets) // pinned until the dump is written
	if err != nil {
		return nil, err
	}
	deadline := start.Add(cfg.Timeout)
	d, err := parseDump(buf)
	if err != nil {
		return nil, err
	}
	res := &Result{Paths: make([]Path, len(targets)), Found: make([]bool, len(targets)), Pause: pause,
		DumpBytes: int64(len(buf)), Objects: len(d.objects)}
	var notes []string

	dumper := uint64(0)
	for _, g := range d.goroutines {
		if g.waitReason == "dumping heap" {
			dumper = g.id
		}
	}
	roots := d.roots(skipOwnFrames(dumper, cfg.Own))
	objs := make([]int, len(addrs))
	for i, a := range addrs {
		objs[i] = d.find(a)
	}
	// The targets' own list is the caller's: it is no path.
	blocked := []int{d.find(pinned)}
	s := d.search(roots, objs, blocked, cfg.MaxDepth, deadline)
	if s.stopped != "" {
		notes = append(notes, s.stopped)
	}

	bin := &binaryInfo{}
	anyFound := false
	for _, o := range objs {
		_, ok := s.pathTo(o)
		anyFound = anyFound || ok
	}
	switch {
	case anyFound && cfg.noBinary:
		bin.missing = []string{"symbol table", "DWARF"}
	case anyFound:
		bin = openBinary()
		defer bin.close()
	}
	n := &namer{d: d, bin: bin, dw: bin.dw, funcName: runtimeFuncName}
	named, missing, skipped := 0, 0, 0
	for i, o := range objs {
		c, ok := s.pathTo(o)
		if !ok {
			missing++
			continue
		}
		if named >= cfg.MaxPaths || time.Now().After(deadline) {
			skipped++
			continue
		}
		res.Paths[i], res.Found[i] = n.name(c), true
		named++
	}
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d more paths were found and not named (at most %d are, within %v)",
			skipped, cfg.MaxPaths, cfg.Timeout))
	}
	if missing > 0 {
		what := fmt.Sprintf("%d targets", missing)
		if missing == 1 {
			what = "1 target"
		}
		notes = append(notes, fmt.Sprintf("%s had no path from a root within %d objects: one kept only by a "+
			"runtime.AddCleanup closure or argument, or by another module's data, is not in the dump", what, cfg.MaxDepth))
	}
	if anyFound {
		if note := bin.note(); note != "" {
			notes = append(notes, note)
		}
	}
	res.Note = strings.Join(notes, "; ")
	res.Total = time.Since(start)
	return res, nil
}

// estimateDump estimates the size of a heap dump now: the in-use heap
// spans (every object slot is written whole, with its field list) and the
// goroutine stacks, times 1.4.
func estimateDump() int64 {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
	metrics.Read(samples)
	var total uint64
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			total += s.Value.Uint64()
		}
	}
	return int64(float64(total) * 1.4)
}

// writeDump writes a heap dump to a temporary file and reads it back. It
// removes the dumps that dead processes left first (createDump),
// holds tensorlife's device calls off and waits for the goroutines in
// system calls to settle.
func writeDump(cfg Config) (buf []byte, pause time.Duration, err error) {
	f, err := createDump(dumpDir())
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		name := f.Name()
		_ = f.Close()
		_ = os.Remove(name)
	}()
	runtime.GC() // no collection in flight: the dump sweeps the heap itself
	release := heapfence.HoldDevices()
	if !cfg.unguarded {
		if err := waitQuiet(cfg.MaxWait); err != nil {
			release()
			return nil, 0, err
		}
	}
	t0 := time.Now()
	debug.WriteHeapDump(f.Fd())
	pause = time.Since(t0)
	release()
	info, err := f.Stat()
	if err != nil {
		return nil, pause, fmt.Errorf("retainers: heap dump file: %w", err)
	}
	if info.Size() > cfg.MaxDumpBytes {
		return nil, pause, &TooLargeError{Bytes: info.Size(), Limit: cfg.MaxDumpBytes}
	}
	buf = make([]byte, info.Size())
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, pause, fmt.Errorf("retainers: reading the heap dump: %w", err)
	}
	return buf, pause, nil
}
