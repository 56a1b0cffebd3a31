package oomdump_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/oomdump"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// maskBytes is the size of one leaked mask: 64x64 float32s, a size class of
// its own, so the budget holds a known number of them.
const maskBytes = 64 * 64 * 4

// service is a tracker, a pool with a small budget that tells the dumper of
// its out-of-memory errors, and the tensors a test leaks into it.
type service struct {
	t      *testing.T
	tr     *track.Tracker
	pool   *pool.Pool
	dumper *oomdump.Dumper
	dir    string
	held   []*tensor.Tensor
}

func newService(t *testing.T, history bool, opts ...oomdump.Option) *service {
	t.Helper()
	topts := []track.Option{track.Name("svc")}
	if history {
		topts = append(topts, track.KeepHistory(1<<12))
	}
	tr, err := track.New(topts...)
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(4 << 20)
	require.NoError(t, err)
	s := &service{t: t, tr: tr, dir: filepath.Join(t.TempDir(), "oom", "dumps")}
	s.dumper, err = oomdump.New(tr, s.dir, opts...)
	require.NoError(t, err)
	s.pool, err = pool.New(dev, pool.Tracker(tr), pool.Budget(16*maskBytes), pool.OnOutOfMemory(s.dumper.OutOfMemory))
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, m := range s.held {
			require.NoError(t, m.Free())
		}
		require.NoError(t, s.pool.Close())
		tracktest.VerifyNone(t, tr)
	})
	return s
}

// leakMasks keeps masks until the budget runs out, and returns the error.
func (s *service) leakMasks() error {
	for range 1000 {
		m, err := tensor.New(context.Background(), s.pool, tensor.Float32, 64, 64)
		if err != nil {
			return err
		}
		s.held = append(s.held, m)
	}
	return nil
}

// files lists the dump directory.
func (s *service) files() []string {
	s.t.Helper()
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(s.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, filepath.Join(s.dir, e.Name()))
	}
	return names
}

func TestDumpOnTheFirstOutOfMemoryError(t *testing.T) {
	s := newService(t, true, oomdump.Interval(time.Hour))
	assert.Empty(t, s.files(), "nothing is written, not even the directory, before an OOM")
	err := s.leakMasks()
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	require.NoError(t, s.dumper.Wait())

	dump, ok := s.dumper.Last()
	require.True(t, ok)
	require.Len(t, dump.Files, 4)
	assert.NoError(t, dump.Err)
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Same(t, oom, dump.OOM)
	sorted := slices.Clone(dump.Files)
	slices.Sort(sorted)
	assert.Equal(t, sorted, s.files(), "the directory holds the dump's files and nothing else")
	for i, suffix := range []string{".pb.gz", ".summary.txt", ".trace.json", ".svg"} {
		name := filepath.Base(dump.Files[i])
		assert.True(t, strings.HasSuffix(name, suffix), name)
		assert.Regexp(t, `^svc-oom-\d{8}T\d{6}\.\d{3}Z-1\.`, name, "tracker, time and number")
	}

	// The profile is the live set at the failure: every mask held then.
	f, err := os.Open(dump.Files[0])
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	require.NoError(t, p.CheckValid())
	var inuse int64
	for _, smp := range p.Sample {
		inuse += smp.Value[3]
	}
	assert.Equal(t, int64(len(s.held))*maskBytes, inuse, "the masks live when the allocation failed")
	assert.Equal(t, int64(16), int64(len(s.held)), "the budget holds 16 masks")

	summary, err := os.ReadFile(dump.Files[1])
	require.NoError(t, err)
	assert.Contains(t, string(summary), `tensorlife out-of-memory dump 1 of tracker "svc"`)
	assert.Contains(t, string(summary), oom.Error(), "the error, sites and all")
	assert.Contains(t, string(summary), "leakMasks", "the summary's top sites name the leaking function")
	// The pool was made with the tracker alone, after the dumper: its
	// figures are in the summary all the same.
	assert.Contains(t, string(summary), "\nPools\n", "the pool's figures, found on the tracker")
	assert.Contains(t, string(summary), "\nDevices (", "the pool's device")
	trace, err := os.ReadFile(dump.Files[2])
	require.NoError(t, err)
	assert.True(t, json.Valid(trace), "the trace is JSON")
	svg, err := os.ReadFile(dump.Files[3])
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")

	// A second OOM within the interval writes nothing.
	_, err = tensor.New(context.Background(), s.pool, tensor.Float32, 64, 64)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	require.NoError(t, s.dumper.Wait())
	assert.Equal(t, sorted, s.files(), "no file added")
	assert.Equal(t, oomdump.Stats{Dumps: 1, Skipped: 1}, s.dumper.Stats())
	require.NoError(t, s.dumper.Close())
}

// After the interval, the next OOM gets a dump of its own, under names
// that differ from the first's.
func TestDumpAgainAfterTheInterval(t *testing.T) {
	s := newService(t, false, oomdump.Interval(time.Minute))
	now := time.Date(2025, 3, 14, 9, 26, 53, 120e6, time.UTC)
	s.dumper.SetClock(func() time.Time { return now })
	require.ErrorIs(t, s.leakMasks(), tensor.ErrOutOfMemory)
	require.NoError(t, s.dumper.Wait())
	first := s.files()
	assert.Equal(t, []string{"svc-oom-20250314T092653.120Z-1.pb.gz", "svc-oom-20250314T092653.120Z-1.summary.txt"},
		baseNames(first), "without history, no timeline")

	for _, step := range []struct {
		after time.Duration
		files int
	}{
		{59 * time.Second, 2}, // within the interval: skipped
		{time.Minute, 4},      // a minute after the first dump
		{time.Minute + time.Second, 4},
	} {
		now = time.Date(2025, 3, 14, 9, 26, 53, 120e6, time.UTC).Add(step.after)
		_, err := tensor.New(context.Background(), s.pool, tensor.Float32, 64, 64)
		require.ErrorIs(t, err, tensor.ErrOutOfMemory)
		require.NoError(t, s.dumper.Wait())
		assert.Len(t, s.files(), step.files, "%v after the first dump", step.after)
	}
	assert.Equal(t, []string{
		"svc-oom-20250314T092653.120Z-1.pb.gz", "svc-oom-20250314T092653.120Z-1.summary.txt",
		"svc-oom-20250314T092753.120Z-2.pb.gz", "svc-oom-20250314T092753.120Z-2.summary.txt",
	}, baseNames(s.files()))
	assert.Equal(t, oomdump.Stats{Dumps: 2, Skipped: 2}, s.dumper.Stats())
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// The failing allocation does not wait for the files: it returns while the
// dump is still being written, on the dumper's goroutine, and Close waits
// for that goroutine to finish. In a synctest bubble, synctest.Wait returns
// once Close and the dump's goroutine are both blocked: Close waits on the
// dump, which waits on release.
func TestTheFailingAllocationDoesNotWaitForTheFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		s := newService(t, true, oomdump.OnDump(func(oomdump.Dump) { <-release }))
		t.Cleanup(func() { once.Do(func() { close(release) }) })

		require.ErrorIs(t, s.leakMasks(), tensor.ErrOutOfMemory, "the allocation returned while the dump is held")
		_, done := s.dumper.Last()
		assert.False(t, done, "the dump is still being written")

		closed := make(chan error, 1)
		go func() { closed <- s.dumper.Close() }()
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while the dump was still being written", err)
		default:
		}
		once.Do(func() { close(release) })
		require.NoError(t, <-closed)
		dump, done := s.dumper.Last()
		require.True(t, done, "Close waited for the dump")
		assert.Len(t, dump.Files, 4)

		_, err := tensor.New(context.Background(), s.pool, tensor.Float32, 64, 64)
		require.ErrorIs(t, err, tensor.ErrOutOfMemory)
		assert.Equal(t, oomdump.Stats{Dumps: 1}, s.dumper.Stats(), "a closed dumper ignores what it hears")
		assert.NoError(t, s.dumper.Close(), "closing twice is harmless")
	})
}

// Many requests run out of memory at once: one dump, the others counted.
func TestAnOOMStormWritesOneDump(t *testing.T) {
	s := newService(t, false, oomdump.Interval(time.Hour))
	require.ErrorIs(t, s.leakMasks(), tensor.ErrOutOfMemory)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				_, err := tensor.New(context.Background(), s.pool, tensor.Float32, 64, 64)
				assert.ErrorIs(t, err, tensor.ErrOutOfMemory)
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.dumper.Close())
	assert.Equal(t, oomdump.Stats{Dumps: 1, Skipped: 80}, s.dumper.Stats())
	assert.Len(t, s.files(), 2)
}

// A dump that cannot be written says why, in Dump.Err, Stats and Close.
func TestADumpThatCannotBeWritten(t *testing.T) {
	tr, err := track.New(track.Name("svc"))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "not-a-directory")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	var heard []oomdump.Dump
	d, err := oomdump.New(tr, filepath.Join(file, "dumps"), oomdump.OnDump(func(dump oomdump.Dump) {
		heard = append(heard, dump)
	}))
	require.NoError(t, err)
	d.OutOfMemory(nil)
	err = d.Close()
	require.Error(t, err)
	var pathErr *fs.PathError
	assert.ErrorAs(t, err, &pathErr)
	require.Len(t, heard, 1)
	assert.Empty(t, heard[0].Files)
	assert.Equal(t, err, heard[0].Err)
	assert.Equal(t, oomdump.Stats{Dumps: 1, Failed: 1}, d.Stats())
}

// A dump made without an error to show (OutOfMemory(nil)) still writes
// the profile and the summary.
func TestDumpWithoutAnError(t *testing.T) {
	tr, err := track.New(track.Name("svc"))
	require.NoError(t, err)
	d, err := oomdump.New(tr, t.TempDir())
	require.NoError(t, err)
	d.OutOfMemory(nil)
	require.NoError(t, d.Close())
	dump, ok := d.Last()
	require.True(t, ok)
	require.Len(t, dump.Files, 2)
	summary, err := os.ReadFile(dump.Files[1])
	require.NoError(t, err)
	assert.Contains(t, string(summary), "no detail given")
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	tr, err := track.New(track.Name("svc"))
	require.NoError(t, err)
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		tr   *track.Tracker
		dir  string
		opts []oomdump.Option
		want error
	}{
		{"nil tracker", nil, dir, nil, track.ErrNilTracker},
		{"empty directory", tr, "", nil, oomdump.ErrInvalidOption},
		{"nil option", tr, dir, []oomdump.Option{nil}, oomdump.ErrInvalidOption},
		{"negative interval", tr, dir, []oomdump.Option{oomdump.Interval(-time.Second)}, oomdump.ErrInvalidOption},
		{"nil OnDump", tr, dir, []oomdump.Option{oomdump.OnDump(nil)}, oomdump.ErrInvalidOption},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := oomdump.New(tt.tr, tt.dir, tt.opts...)
			assert.ErrorIs(t, err, tt.want)
			assert.Nil(t, d)
		})
	}
}

// TestLongTrackerNameStillDumps guards every dump against a long tracker
// name: at 200 bytes and more the timeline's title was refused, at 240 the
// file names were too long for the system. A legal name of any length
// writes all four files.
func TestLongTrackerNameStillDumps(t *testing.T) {
	for _, n := range []int{200, 240, 4096} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			name := strings.Repeat("m", n)
			tr, err := track.New(track.Name(name), track.KeepHistory(1<<10))
			require.NoError(t, err)
			d, err := oomdump.New(tr, t.TempDir())
			require.NoError(t, err)
			d.OutOfMemory(&tensor.OOMError{Device: "host", Requested: 1, Limit: 1 << 20})
			require.NoError(t, d.Close())
			dump, ok := d.Last()
			require.True(t, ok)
			require.NoError(t, dump.Err)
			require.Len(t, dump.Files, 4, "profile, summary, trace and picture")
			for _, f := range dump.Files {
				assert.FileExists(t, f)
				assert.LessOrEqual(t, len(filepath.Base(f)), 255)
			}
			summary, err := os.ReadFile(dump.Files[1])
			require.NoError(t, err)
			assert.Contains(t, string(summary), strconv.Quote(name), "the summary names the tracker whole")
		})
	}
}

// TestPanickingOnDumpIsRecovered guards the host against its OnDump
// callback: a panic there is recovered on the dumper's goroutine, counted
// and logged; the dump is recorded, Close returns, and the next dump calls
// the callback again.
func TestPanickingOnDumpIsRecovered(t *testing.T) {
	var logged syncBuffer
	tr, err := track.New(track.Name("svc"), track.Logger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	calls := 0
	d, err := oomdump.New(tr, t.TempDir(), oomdump.Interval(0),
		oomdump.OnDump(func(oomdump.Dump) {
			calls++
			panic("callback bug")
		}))
	require.NoError(t, err)
	for range 2 {
		d.OutOfMemory(nil)
		require.NoError(t, d.Wait(), "the files were written; the callback's panic is no dump error")
	}
	require.NoError(t, d.Close())
	assert.Equal(t, 2, calls)
	dump, ok := d.Last()
	require.True(t, ok)
	assert.Len(t, dump.Files, 2)
	assert.Equal(t, oomdump.Stats{Dumps: 2, Panics: 2}, d.Stats())
	assert.Equal(t, 2, strings.Count(logged.String(), "panic in its OnDump callback"), "%s", logged.String())
	assert.Contains(t, logged.String(), "callback bug")
}

// panickyPool is a pool-like part of a tracker whose figures panic: user
// code the summary calls on the dumper's goroutine.
type panickyPool struct{ _ int }

func (*panickyPool) Stats() pool.Stats { panic("figures bug") }

func (*panickyPool) PartInfo() track.PartInfo { return track.PartInfo{Kind: "pool", Left: -1} }

// TestPanickingSourceLeavesItsDumpWhole guards the host against the parts
// a dump reads: a panic in a pool's Stats, on the dumper's goroutine, is
// recovered by the summary's reading, counted on the tracker and logged,
// and the dump is written whole, the summary naming the part it could not
// read.
func TestPanickingSourceLeavesItsDumpWhole(t *testing.T) {
	var logged syncBuffer
	tr, err := track.New(track.Name("svc"), track.Logger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	var heard []oomdump.Dump
	dir := t.TempDir()
	d, err := oomdump.New(tr, dir,
		oomdump.OnDump(func(dump oomdump.Dump) { heard = append(heard, dump) }))
	require.NoError(t, err)
	bad := &panickyPool{}
	track.Attach(tr, bad) // as a pool made with tr attaches itself
	defer runtime.KeepAlive(bad)
	d.OutOfMemory(nil)
	require.NoError(t, d.Close())
	require.Len(t, heard, 1)
	require.NoError(t, heard[0].Err)
	assert.Len(t, heard[0].Files, 2, "the profile and the summary")
	assert.Equal(t, oomdump.Stats{Dumps: 1}, d.Stats(), "nothing reached the dumper's own recover")
	assert.EqualValues(t, 1, tr.Totals().PartPanics)
	assert.Contains(t, logged.String(), "method=Stats")
	assert.Contains(t, logged.String(), "figures bug")
	summary, err := os.ReadFile(heard[0].Files[1])
	require.NoError(t, err)
	assert.Contains(t, string(summary), "panickyPool.Stats panicked")
}

// syncBuffer is a bytes.Buffer a logger on another goroutine may write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The dump carries the open requests that held the memory when it ran out:
// the error's rows, captured at the failure, whatever has ended since.
func TestDumpNamesTheOpenRequests(t *testing.T) {
	s := newService(t, false, oomdump.Interval(time.Hour))
	ctx, end := track.WithRequest(context.Background())
	ctx = track.WithLabels(ctx, "route", "/generate")
	var err error
	for range 1000 {
		var m *tensor.Tensor
		if m, err = tensor.New(ctx, s.pool, tensor.Float32, 64, 64); err != nil {
			break
		}
		s.held = append(s.held, m)
	}
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	end() // before the dump is written, maybe
	require.NoError(t, s.dumper.Wait())
	dump, ok := s.dumper.Last()
	require.True(t, ok)
	summary, err := os.ReadFile(dump.Files[1])
	require.NoError(t, err)
	assert.Contains(t, string(summary), "largest open requests (1 open, 256 KiB in 16 tensors in flight):")
	assert.Contains(t, string(summary), "1. 256 KiB in 16 tensors (100% of the limit), open ")
	assert.Contains(t, string(summary), "{route=/generate}")
	require.NoError(t, s.dumper.Close())
}
