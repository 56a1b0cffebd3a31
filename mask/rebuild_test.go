package mask

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// rebuilds collects reports.
type rebuilds struct {
	mu  sync.Mutex
	got []Rebuild
}

func (r *rebuilds) add(rb Rebuild) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rb)
}

func (r *rebuilds) all() []Rebuild {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rebuild(nil), r.got...)
}

func request(id string) context.Context {
	return track.WithLabels(context.Background(), "request", id)
}

func TestRebuildReportedAtTheLine(t *testing.T) {
	e := newEnv(t)
	var got rebuilds
	b := e.builder(t, OnRebuild(got.add))
	ctx := request("r1")

	var masks []*tensor.Tensor
	var line int
	for range 3 {
		line = callerLine() + 1
		m, err := b.Padding(ctx, []int{2}, 4)
		require.NoError(t, err, "detection alone does not refuse")
		masks = append(masks, m)
	}
	reports := got.all()
	require.Len(t, reports, 2)
	for i, r := range reports {
		assert.Equal(t, i+2, r.Count)
		assert.True(t, r.PreviousLive, "the earlier masks are still held")
		assert.False(t, r.Refused)
		assert.Equal(t, int64(4), r.Bytes)
		assert.True(t, track.NewLabels("request", "r1").Equal(r.Labels))
		assert.Equal(t, "rebuild_test.go", filepath.Base(r.Location.File))
		assert.Equal(t, line, r.Location.Line)
		assert.Contains(t, r.Location.Function, "TestRebuildReportedAtTheLine")
		require.NotNil(t, r.Site)
		assert.Equal(t, r.Location, r.Site.Location())
		assert.Contains(t, r.String(), Advice)
		assert.Contains(t, r.String(), fmt.Sprintf("rebuild_test.go:%d", line))
	}
	assert.Equal(t, int64(2), b.Rebuilds())
	assert.Equal(t, int64(2), e.tr.Totals().Event(track.EventMaskRebuilt))

	for _, m := range masks {
		free(t, m)
	}
	m, err := b.Padding(ctx, []int{2}, 4) // another line: another site
	require.NoError(t, err)
	free(t, m)
	assert.Len(t, got.all(), 2)
}

func TestRebuildOfFreedMask(t *testing.T) {
	e := newEnv(t)
	var got rebuilds
	b := e.builder(t, OnRebuild(got.add))
	ctx := request("r1")
	for range 3 { // the leaky pattern without the leak: still one mask per step
		m, err := b.Causal(ctx, 3)
		require.NoError(t, err)
		free(t, m)
	}
	reports := got.all()
	require.Len(t, reports, 2)
	assert.False(t, reports[0].PreviousLive)
	assert.False(t, reports[1].PreviousLive)
}

func TestNoRebuild(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, b *Builder)
	}{
		{"one mask per request", func(t *testing.T, b *Builder) {
			for _, id := range []string{"r1", "r2", "r3"} {
				m, err := b.Padding(request(id), []int{1}, 2)
				require.NoError(t, err)
				free(t, m)
			}
		}},
		{"no labels", func(t *testing.T, b *Builder) {
			for range 3 {
				m, err := b.Padding(context.Background(), []int{1}, 2)
				require.NoError(t, err)
				free(t, m)
			}
		}},
		{"different sites", func(t *testing.T, b *Builder) {
			ctx := request("r1")
			m1, err := b.Padding(ctx, []int{1}, 2)
			require.NoError(t, err)
			m2, err := b.Causal(ctx, 2)
			require.NoError(t, err)
			free(t, m1)
			free(t, m2)
		}},
		{"growth", func(t *testing.T, b *Builder) {
			g, err := b.NewGrowable(request("r1"), 2, 1)
			require.NoError(t, err)
			for range 100 {
				require.NoError(t, g.Append(1))
			}
			free(t, g)
		}},
		{"detection off", func(t *testing.T, b *Builder) {
			off, err := NewBuilder(b.Allocator(), DetectRebuilds(false), Strict(true))
			require.NoError(t, err)
			for range 3 {
				m, err := off.Padding(request("r1"), []int{1}, 2)
				require.NoError(t, err)
				free(t, m)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var got rebuilds
			b := e.builder(t, OnRebuild(got.add))
			tc.run(t, b)
			assert.Empty(t, got.all())
			assert.Zero(t, e.tr.Totals().Event(track.EventMaskRebuilt))
		})
	}
}

func TestGrowableRebuilt(t *testing.T) {
	e := newEnv(t)
	var got rebuilds
	b := e.builder(t, OnRebuild(got.add))
	var gs []*Growable
	for range 2 {
		g, err := b.NewGrowable(request("r1"), 1, 4)
		require.NoError(t, err)
		gs = append(gs, g)
	}
	reports := got.all()
	require.Len(t, reports, 1)
	assert.True(t, reports[0].PreviousLive)

	free(t, gs[0])
	free(t, gs[1])
	g, err := b.NewGrowable(request("r1"), 1, 4) // another line
	require.NoError(t, err)
	free(t, g)
	for range 2 {
		g, err := b.NewGrowable(request("r2"), 1, 4)
		require.NoError(t, err)
		free(t, g)
	}
	reports = got.all()
	require.Len(t, reports, 2)
	assert.False(t, reports[1].PreviousLive, "a freed growable mask is not live")
}

func TestStrictRefusesRebuild(t *testing.T) {
	e := newEnv(t)
	var got rebuilds
	b := e.builder(t, Strict(true), OnRebuild(got.add))
	ctx := request("r1")

	var kept []*tensor.Tensor
	var errs []error
	for range 3 {
		m, err := b.CausalPadding(ctx, []int{2, 1}, 2)
		if err != nil {
			assert.Nil(t, m)
			errs = append(errs, err)
			continue
		}
		kept = append(kept, m)
	}
	require.Len(t, kept, 1)
	require.Len(t, errs, 2)
	for i, err := range errs {
		assert.ErrorIs(t, err, ErrMaskRebuilt)
		var re *RebuildError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, i+2, re.Count)
		assert.True(t, re.Refused)
		assert.True(t, re.PreviousLive, "the kept mask is live; refused ones do not replace it")
		assert.Contains(t, err.Error(), Advice)
	}
	assert.Equal(t, int64(1), e.tr.Totals().LiveCount, "refused masks were freed")
	assert.Equal(t, int64(2), b.Rebuilds())
	free(t, kept[0])

	var gerr error
	for range 2 {
		var g *Growable
		g, gerr = b.NewGrowable(request("r2"), 1, 1)
		if gerr == nil {
			defer free(t, g)
		}
	}
	assert.ErrorIs(t, gerr, ErrMaskRebuilt)
}

// Without a tracker's site for a mask (no tracker, or a tracker whose stack
// table is full), the Builder tells call sites apart by the stacks it
// captures itself, and a report still names the line.
func TestRebuildWithoutTrackerSite(t *testing.T) {
	full, err := track.New(track.MaxSites(1), track.OnLeak(func(track.LeakReport) {}))
	require.NoError(t, err)
	tests := []struct {
		name     string
		tr       *track.Tracker
		overflow bool
	}{
		{"no tracker", nil, false},
		{"stack table full", full, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host, err := tensor.NewHostDevice(1 << 20)
			require.NoError(t, err)
			alloc, err := tensor.NewDeviceAllocator(host, tc.tr)
			require.NoError(t, err)
			var filler *tensor.Tensor
			if tc.tr != nil {
				filler, err = tensor.New(context.Background(), alloc, tensor.Uint8, 1) // takes the one site
				require.NoError(t, err)
			}
			var got rebuilds
			b, err := NewBuilder(alloc, OnRebuild(got.add))
			require.NoError(t, err)

			var line int
			for range 2 {
				line = callerLine() + 1
				m, err := b.Padding(request("r1"), []int{1}, 1)
				require.NoError(t, err)
				free(t, m)
			}
			other, err := b.Padding(request("r1"), []int{1}, 1) // another line
			require.NoError(t, err)
			free(t, other)

			reports := got.all()
			require.Len(t, reports, 1)
			if tc.overflow {
				require.NotNil(t, reports[0].Site)
				assert.True(t, reports[0].Site.Overflow())
			} else {
				assert.Nil(t, reports[0].Site)
			}
			assert.Equal(t, line, reports[0].Location.Line)
			assert.Equal(t, "rebuild_test.go", filepath.Base(reports[0].Location.File))
			assert.Contains(t, reports[0].Location.Function, "TestRebuildWithoutTrackerSite")
			assert.Equal(t, int64(1), b.Rebuilds())
			if filler != nil {
				free(t, filler)
			}
			assert.Zero(t, host.Blocks())
		})
	}
}

func TestRebuildDefaultLog(t *testing.T) {
	var buf bytes.Buffer
	e := newEnv(t, track.Logger(slog.New(slog.NewTextHandler(&buf, nil)))) // the rebuild report is the tracker's
	b := e.builder(t)
	ctx := request("r1")
	var line int
	for range 10 {
		line = callerLine() + 1
		m, err := b.Padding(ctx, []int{1}, 1)
		require.NoError(t, err)
		free(t, m)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Len(t, lines, 4, "the 1st, 2nd, 4th and 8th of 9 rebuilds at one site are logged:\n%s", out)
	assert.Contains(t, lines[0], Advice)
	assert.Contains(t, lines[0], fmt.Sprintf("rebuild_test.go:%d", line))
	assert.Contains(t, lines[0], "request=r1")
	assert.Contains(t, lines[3], "site_rebuilds=8")
	assert.Equal(t, int64(9), b.Rebuilds())
}

func TestRebuildMemoryIsBounded(t *testing.T) {
	e := newEnv(t)
	var got rebuilds
	b := e.builder(t, RememberRequests(2), OnRebuild(got.add))
	// One call site (a site is the whole stack, so the loop keeps it one):
	// r1 is forgotten once four other requests have built since.
	steps := []struct {
		id          string
		wantReports int
	}{
		{"r1", 0}, {"r2", 0}, {"r3", 0}, {"r4", 0}, {"r5", 0},
		{"r1", 0}, // forgotten: counts as its first mask
		{"r1", 1}, // remembered again
	}
	for _, s := range steps {
		m, err := b.Padding(request(s.id), []int{1}, 1)
		require.NoError(t, err)
		free(t, m)
		assert.Len(t, got.all(), s.wantReports, "after %s", s.id)
		assert.LessOrEqual(t, b.det.remembered(), 2)
	}
}

func TestRebuildConcurrentRequests(t *testing.T) {
	e := newEnv(t)
	var got rebuilds
	b := e.builder(t, OnRebuild(got.add))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				ctx := request(fmt.Sprintf("w%d-%d", w, i))
				g, err := b.NewGrowable(ctx, 2, 1)
				if !assert.NoError(t, err) {
					return
				}
				for range 10 {
					assert.NoError(t, g.Append(1))
				}
				assert.NoError(t, g.Free())
			}
		})
	}
	wg.Wait()
	assert.Empty(t, got.all())
}
