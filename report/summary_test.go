package report

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

var updateGolden = flag.Bool("update", false, "rewrite the summary golden files")

// summaryAt fixes the summary's clock, so ages print the same every run.
func summaryAt(now time.Time) Option {
	return optionFunc(func(c *config) error {
		c.now = func() time.Time { return now }
		return nil
	})
}

type summaryPool pool.Stats

func (p summaryPool) Stats() pool.Stats { return pool.Stats(p) }

type summaryCache mask.CacheStats

func (c summaryCache) Stats() mask.CacheStats { return mask.CacheStats(c) }

type summaryDevice struct {
	name        string
	free, total int64
	err         error
}

func (d summaryDevice) Name() string                   { return d.name }
func (d summaryDevice) MemInfo() (int64, int64, error) { return d.free, d.total, d.err }

// The helpers below allocate from their own lines: each is one site.

//go:noinline
func summaryKVCache(t *testing.T, tr *track.Tracker, n int, bytes int64) []*track.Record {
	var out []*track.Record
	for range n {
		r := &track.Record{Bytes: bytes, Meta: track.InternMeta("kv-cache", "cuda:0", "float16", nil)}
		require.NoError(t, tr.Books().Record(context.Background(), r, 0))
		out = append(out, r)
	}
	return out
}

//go:noinline
func summaryMasks(t *testing.T, ctx context.Context, tr *track.Tracker, n int, bytes int64) []*track.Record {
	var out []*track.Record
	for range n {
		r := &track.Record{Bytes: bytes, Meta: track.InternMeta("mask", "cuda:0", "bool", nil)}
		require.NoError(t, tr.Books().Record(ctx, r, 0))
		out = append(out, r)
	}
	return out
}

//go:noinline
func summaryAllocationsFromAFunctionWhoseNameIsFarTooLongToFitOnOneLineOfTheSummaryReport(
	t *testing.T, tr *track.Tracker, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("logits", "cuda:0", "float32", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), r, 0))
	return r
}

func goldenSummary(t *testing.T, name string, got string) {
	t.Helper()
	// The wall-clock time of the report is the one thing that changes.
	got = regexp.MustCompile(`(?m)^taken [^,]+,`).ReplaceAllString(got, "taken <time>,")
	path := filepath.Join("testdata", name)
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update to write it", t.Name())
	assert.Equal(t, string(want), got)
}

func assertFits(t *testing.T, report string) {
	t.Helper()
	for i, line := range strings.Split(report, "\n") {
		assert.LessOrEqual(t, len(line), summaryWidth, "line %d is too wide: %q", i+1, line)
	}
}

func TestSummaryGolden(t *testing.T) {
	tr, err := track.New(track.Name("summary"), track.OnLeak(func(track.LeakReport) {}))
	require.NoError(t, err)
	w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)

	kv := summaryKVCache(t, tr, 4, 1<<20)
	var masks []*track.Record
	for range 6 { // one window per request, each keeping two more masks
		ctx, end := track.WithRequest(context.Background())
		masks = append(masks, summaryMasks(t, ctx, tr, 2, 64<<10)...)
		end()
		require.NoError(t, w.Tick())
	}
	long := summaryAllocationsFromAFunctionWhoseNameIsFarTooLongToFitOnOneLineOfTheSummaryReport(t, tr, 1000)
	require.NoError(t, (kv[3]).Release())
	require.True(t, (kv[0]).ReportDropped(nil, ""))
	tr.Books().Note(track.EventDoubleFree, nil, 64)
	tr.Books().Note(track.EventOOM, nil, 1<<30)
	tr.Books().Note(track.EventMaskRebuilt, nil, 64<<10)
	require.Len(t, w.Suspects(), 1)

	opts := []Option{
		summaryAt(tr.Started().Add(time.Hour)),
		WithSources(Sources{Pools: []PoolSource{
			summaryPool{Device: "cuda:0", Reserved: 8 << 20, Active: 4<<20 + 768<<10 + 1000, Cached: 3<<20 + 256<<10 - 1000,
				PeakReserved: 10 << 20, PeakActive: 6 << 20, Limit: 16 << 20, DeviceAllocs: 9, DeviceFrees: 2,
				Hits: 120, Misses: 9, Evictions: 2, OOMs: 1},
			summaryPool{Device: "cuda:1-with-a-long-name", Reserved: 512},
		},
			Caches: []CacheSource{summaryCache{Name: "attention-masks", Bytes: 768 << 10, Entries: 12, MaxBytes: 4 << 20,
				Hits: 30, Misses: 12, Evictions: 0}},
			Devices: []DeviceSource{summaryDevice{name: "cuda:0", free: 70 << 30, total: 80 << 30},
				summaryDevice{name: "cuda:1", err: errors.New("driver not loaded")}},
		}),
		TopSites(3),
	}
	var buf bytes.Buffer
	require.NoError(t, WriteSummary(&buf, tr, opts...))
	report := buf.String()
	assertFits(t, report)
	goldenSummary(t, "summary.golden", report)

	for _, r := range append(kv[:3], append(masks, long)...) {
		require.NoError(t, r.Release())
	}
}

func TestSummaryEmptyTracker(t *testing.T) {
	tr, err := track.New(track.Name("empty"))
	require.NoError(t, err)
	w, err := watch.New(tr) // found on the tracker
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteSummary(&buf, tr, summaryAt(tr.Started().Add(90*time.Second))))
	runtime.KeepAlive(w)
	report := buf.String()
	assertFits(t, report)
	goldenSummary(t, "summary_empty.golden", report)
	assert.Contains(t, report, "nothing is live")
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSummaryRejectsBadInput(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)

	tests := []struct {
		name string
		w    *bytes.Buffer
		tr   *track.Tracker
		opts []Option
		want error
	}{
		{"nil writer", nil, tr, nil, ErrNilWriter},
		{"nil tracker", &bytes.Buffer{}, nil, nil, track.ErrNilTracker},
		{"negative top sites", &bytes.Buffer{}, tr, []Option{TopSites(-1)}, ErrInvalidOption},
		{"too many top sites", &bytes.Buffer{}, tr, []Option{TopSites(MaxTopSites + 1)}, ErrInvalidOption},
		{"nil option", &bytes.Buffer{}, tr, []Option{nil}, ErrInvalidOption},
		{"nil pool", &bytes.Buffer{}, tr, []Option{WithSources(Sources{Pools: []PoolSource{nil}})}, ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.w == nil {
				err = WriteSummary(nil, tt.tr, tt.opts...)
			} else {
				err = WriteSummary(tt.w, tt.tr, tt.opts...)
				assert.Zero(t, tt.w.Len(), "nothing written on bad input")
			}
			assert.ErrorIs(t, err, tt.want)
		})
	}
	t.Run("write error", func(t *testing.T) {
		assert.ErrorContains(t, WriteSummary(failingWriter{}, tr), "disk full")
	})
}
