package timeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

func seriesByFunction(tl *timeline.Timeline, suffix string) *timeline.Series {
	for i := range tl.Series {
		if strings.HasSuffix(tl.Series[i].Function, suffix) {
			return &tl.Series[i]
		}
	}
	return nil
}

func TestBuildRebuildsLiveBytesPerSite(t *testing.T) {
	tests := []struct {
		name        string
		history     int
		steps       int
		opts        []timeline.Option
		wantDropped bool
		wantSamples int // 0: one per event time and the ends
	}{
		{name: "complete history", history: 1 << 14, steps: 200},
		{name: "history that dropped events", history: 1, steps: 3000, wantDropped: true},
		{name: "downsampled", history: 1 << 14, steps: 300, opts: []timeline.Option{timeline.Samples(7)}, wantSamples: 7},
		{name: "dropped and downsampled", history: 1, steps: 3000, wantDropped: true,
			opts: []timeline.Option{timeline.Samples(50)}, wantSamples: 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, track.KeepHistory(tc.history))
			ops := run(t, tr, tc.steps)
			tl, err := timeline.Build(tr, tc.opts...)
			require.NoError(t, err)
			log, err := tr.History()
			require.NoError(t, err)

			require.Equal(t, tc.wantDropped, tl.Dropped > 0, "dropped %d", tl.Dropped)
			assert.Equal(t, log.Dropped, tl.Dropped)
			assert.Equal(t, log.Capacity, tl.Capacity)
			assert.Equal(t, len(log.Events), tl.Events+tl.Omitted)
			if tc.wantDropped {
				assert.Positive(t, tl.From, "the window starts after the dropped events")
			} else {
				assert.Equal(t, log.Events[0].Time, tl.From, "the window starts at the first event")
				assert.Zero(t, tl.Omitted)
			}
			switch {
			case tc.wantSamples > 0:
				assert.Len(t, tl.Times, tc.wantSamples)
			case tc.wantDropped:
				assert.Len(t, tl.Times, tl.Events+1, "a sample at From and after each event, the last at To")
			default:
				assert.Len(t, tl.Times, tl.Events, "a sample after each event, the first at From, the last at To")
			}
			require.NotEmpty(t, tl.Times)
			assert.Equal(t, tl.From, tl.Times[0])
			assert.Equal(t, tl.To, tl.Times[len(tl.Times)-1])
			assert.IsNonDecreasing(t, tl.Times)

			require.Len(t, tl.Series, 3, "mask, weights, logits")
			assert.True(t, strings.HasSuffix(tl.Series[0].Function, ".allocMask"), "the leak is the largest band: %s", tl.Series[0].Name)
			ledger := newLedger(log, ops)
			for k, at := range tl.Times {
				want := ledger.liveAt(t, at)
				var sum int64
				for _, s := range tl.Series {
					assert.Equal(t, want[s.Function], s.Values[k], "%s at sample %d", s.Name, k)
					sum += s.Values[k]
				}
				assert.Equal(t, sum, tl.Total[k], "total at sample %d", k)
			}
			assert.Equal(t, tr.Totals().LiveBytes, tl.Total[len(tl.Total)-1], "the last sample is the live set")

			mask := seriesByFunction(tl, ".allocMask")
			weights := seriesByFunction(tl, ".allocWeights")
			logits := seriesByFunction(tl, ".allocLogits")
			require.NotNil(t, mask)
			require.NotNil(t, weights)
			require.NotNil(t, logits)
			assert.IsNonDecreasing(t, mask.Values, "the leak only grows")
			assert.Greater(t, mask.Values[len(mask.Values)-1], mask.Values[0])
			assert.EqualValues(t, 512*tc.steps, mask.Peak)
			held := false
			for _, v := range weights.Values {
				held = held || v > 0
				if held {
					assert.EqualValues(t, 8<<10, v, "the weights are a flat band once allocated")
				}
			}
			assert.True(t, held)
			assert.EqualValues(t, 2<<10, logits.Peak)
			assert.EqualValues(t, 512*tc.steps+8<<10+2<<10, tl.Peak)
			assert.Zero(t, logits.Values[len(logits.Values)-1])
		})
	}
}

func TestBandsFoldTheRestIntoOther(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<12))
	ops := run(t, tr, 50)
	tl, err := timeline.Build(tr, timeline.Bands(1))
	require.NoError(t, err)
	log, err := tr.History()
	require.NoError(t, err)

	require.Len(t, tl.Series, 2)
	other := tl.Series[1]
	assert.True(t, other.Other())
	assert.Equal(t, timeline.OtherName, other.Name)
	assert.Equal(t, 2, other.Sites, "weights and logits")
	assert.EqualValues(t, 8<<10+2<<10, other.Peak)
	ledger := newLedger(log, ops)
	for k, at := range tl.Times {
		want := ledger.liveAt(t, at)
		var rest int64
		for fn, v := range want {
			if !strings.HasSuffix(fn, ".allocMask") {
				rest += v
			}
		}
		assert.Equal(t, rest, other.Values[k], "other at sample %d", k)
	}
}

func TestMarkersListNotableEvents(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	ctx := context.Background()
	w := allocWeights(t, tr, ctx, 4096)
	tr.Books().Note(track.EventOOM, w.Site(), 1<<30)
	m := allocMask(t, tr, ctx, 64)
	tr.Books().Note(track.EventLeakSuspect, m.Site(), 64)
	require.True(t, m.ReportDropped(nil, ""))
	tr.Books().Note(track.EventMaskRebuilt, nil, 64)

	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	var kinds []track.EventKind
	for _, mk := range tl.Markers {
		kinds = append(kinds, mk.Kind)
	}
	assert.Equal(t, []track.EventKind{track.EventOOM, track.EventLeakSuspect, track.EventGCLeak, track.EventMaskRebuilt}, kinds)
	assert.EqualValues(t, 1<<30, tl.Markers[0].Bytes)
	assert.Same(t, w.Site(), tl.Markers[0].Site)
	assert.Contains(t, tl.Markers[0].Name, "allocWeights")
	assert.Contains(t, tl.Markers[2].Name, "allocMask")
	assert.Empty(t, tl.Markers[3].Name, "a marker without a site has no name")
	assert.Equal(t, 6, tl.Events, "two allocations and four notes")
	for i := 1; i < len(tl.Markers); i++ {
		assert.LessOrEqual(t, tl.Markers[i-1].Time, tl.Markers[i].Time)
	}
}

func TestBuildOfAnEmptyHistory(t *testing.T) {
	tl, err := timeline.Build(newTracker(t, track.KeepHistory(64)))
	require.NoError(t, err)
	assert.Empty(t, tl.Series)
	assert.Empty(t, tl.Markers)
	assert.Zero(t, tl.Events)
	assert.Zero(t, tl.Peak)
	require.NotEmpty(t, tl.Times)
	for _, v := range tl.Total {
		assert.Zero(t, v)
	}
	assert.Equal(t, `Live memory by site (tracker "test")`, tl.Title)
}

func TestBuildErrors(t *testing.T) {
	withHistory := newTracker(t, track.KeepHistory(64))
	tests := []struct {
		name    string
		tracker *track.Tracker
		opts    []timeline.Option
		want    error
	}{
		{"nil tracker", nil, nil, track.ErrNilTracker},
		{"history off", newTracker(t), nil, track.ErrHistoryOff},
		{"nil option", withHistory, []timeline.Option{nil}, timeline.ErrInvalidOption},
		{"no bands", withHistory, []timeline.Option{timeline.Bands(0)}, timeline.ErrInvalidOption},
		{"too many bands", withHistory, []timeline.Option{timeline.Bands(timeline.MaxBands + 1)}, timeline.ErrInvalidOption},
		{"one sample", withHistory, []timeline.Option{timeline.Samples(1)}, timeline.ErrInvalidOption},
		{"too many samples", withHistory, []timeline.Option{timeline.Samples(timeline.MaxSamples + 1)}, timeline.ErrInvalidOption},
		{"zero budget", withHistory, []timeline.Option{timeline.BudgetLine(0)}, timeline.ErrInvalidOption},
		{"negative budget", withHistory, []timeline.Option{timeline.BudgetLine(-1)}, timeline.ErrInvalidOption},
		{"empty title", withHistory, []timeline.Option{timeline.Title("")}, timeline.ErrInvalidOption},
		{"long title", withHistory, []timeline.Option{timeline.Title(strings.Repeat("x", timeline.MaxTitle+1))}, timeline.ErrInvalidOption},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl, err := timeline.Build(tc.tracker, tc.opts...)
			assert.ErrorIs(t, err, tc.want)
			assert.Nil(t, tl)
		})
	}
}

func TestFromHistory(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<12))
	run(t, tr, 40)
	built, err := timeline.Build(tr, timeline.Title("run"))
	require.NoError(t, err)
	log, err := tr.History()
	require.NoError(t, err)

	fromLog, err := timeline.FromHistory(log, nil, timeline.Title("run"))
	require.NoError(t, err)
	assert.Equal(t, log.Events[len(log.Events)-1].Time, fromLog.To, "the window ends at the last event")
	assert.Equal(t, built.Times, fromLog.Times, "both end with the last event")
	require.Len(t, fromLog.Series, len(built.Series))
	for i := range built.Series {
		assert.Equal(t, built.Series[i].Name, fromLog.Series[i].Name)
		assert.Equal(t, built.Series[i].Values, fromLog.Series[i].Values)
	}

	_, err = timeline.FromHistory(nil, nil)
	assert.ErrorIs(t, err, timeline.ErrNilHistory)
	_, err = timeline.FromHistory(log, nil, timeline.Samples(0))
	assert.ErrorIs(t, err, timeline.ErrInvalidOption)

	small := newTracker(t, track.KeepHistory(1))
	run(t, small, 2000)
	dropped, err := small.History()
	require.NoError(t, err)
	require.Positive(t, dropped.Dropped)
	_, err = timeline.FromHistory(dropped, nil)
	assert.ErrorIs(t, err, timeline.ErrLiveNeeded)
	tl, err := timeline.FromHistory(dropped, small.SiteTotals())
	require.NoError(t, err)
	assert.Equal(t, small.Totals().LiveBytes, tl.Total[len(tl.Total)-1])
}

// The window ends with the workload's last event, not when Build runs: a
// timeline built a while after the work drew a plateau that was not there
// (agentleak's trace ended at 61.6 ms and its window ran to 157.4 ms).
func TestWindowEndsWithTheWorkload(t *testing.T) {
	for _, history := range []int{1 << 12, 16} {
		t.Run(fmt.Sprintf("history %d", history), func(t *testing.T) {
			clk := &stepClock{now: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC), step: time.Millisecond}
			tr := newTracker(t, track.KeepHistory(history), track.Clock(clk.Now))
			run(t, tr, 40)
			log, err := tr.History()
			require.NoError(t, err)
			last := log.Events[len(log.Events)-1].Time
			clk.advance(20 * time.Millisecond) // the program goes on after its workload

			tl, err := timeline.Build(tr)
			require.NoError(t, err)
			assert.Equal(t, last, tl.To)
			assert.Equal(t, last, tl.Times[len(tl.Times)-1])

			var trace bytes.Buffer
			require.NoError(t, tl.WriteTrace(&trace))
			var doc struct {
				TraceEvents []struct {
					Ts float64 `json:"ts"`
				} `json:"traceEvents"`
				OtherData struct {
					WindowToUs float64 `json:"window_to_us"`
				} `json:"otherData"`
			}
			require.NoError(t, json.Unmarshal(trace.Bytes(), &doc))
			lastUs := float64(last) / 1e3
			assert.InDelta(t, lastUs, doc.OtherData.WindowToUs, 1e-3)
			for _, e := range doc.TraceEvents {
				assert.LessOrEqual(t, e.Ts, lastUs+1e-3, "no event after the workload's last")
			}

		})
	}
}

func TestSitesAreGroupedByLine(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	ctx := context.Background()
	// One line reached through two call stacks: one series.
	viaA := func() *track.Record { return allocMask(t, tr, ctx, 100) }
	viaB := func() *track.Record { return allocMask(t, tr, ctx, 200) }
	a, b := viaA(), viaB()
	require.NotSame(t, a.Site(), b.Site(), "two call stacks")

	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	require.Len(t, tl.Series, 1)
	assert.Equal(t, 2, tl.Series[0].Sites)
	assert.EqualValues(t, 300, tl.Series[0].Peak)
	assert.Contains(t, tl.Series[0].Name, "allocMask (helpers_test.go:")
	assert.True(t, strings.HasPrefix(tl.Series[0].Name, "timeline_test.allocMask"), "the import path is dropped: %s", tl.Series[0].Name)
	assert.True(t, strings.HasSuffix(tl.Series[0].File, "helpers_test.go"))
	assert.Positive(t, tl.Series[0].Line)
}

// A timeline of a tracker draws the budget of the pools made with it, with
// no BudgetLine passed.
func TestBuildDrawsThePoolsBudget(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	dev, err := tensor.NewHostDevice(4 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(1<<20))
	require.NoError(t, err)
	x, err := tensor.New(context.Background(), p, tensor.Float32, 256)
	require.NoError(t, err)
	require.NoError(t, x.Free())
	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), tl.BudgetLine)
	tl, err = timeline.Build(tr, timeline.BudgetLine(3<<20))
	require.NoError(t, err)
	assert.Equal(t, int64(3<<20), tl.BudgetLine, "an explicit line wins")
	require.NoError(t, p.Close())
}
