package track_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// hostilePart is an allocator part whose figures are what a test says,
// and whose PartInfo panics when told to.
type hostilePart struct {
	device       string
	reserved     int64
	budget, left int64
	panics       bool
	panicValue   any
}

func (p *hostilePart) PartInfo() track.PartInfo {
	if p.panics {
		panic(p.value())
	}
	return track.PartInfo{Kind: "allocator", Device: p.device, Reserved: p.reserved, Budget: p.budget, Left: p.left}
}

func (p *hostilePart) value() any {
	if p.panicValue != nil {
		return p.panicValue
	}
	return "hostile"
}

// loggedTracker returns a tracker whose log goes to a buffer.
func loggedTracker(t *testing.T) (*track.Tracker, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	tr, err := track.New(track.Logger(slog.New(slog.NewTextHandler(&buf, nil))))
	require.NoError(t, err)
	return tr, &buf
}

func TestGuardRecoversCountsAndLogsOncePerPartAndMethod(t *testing.T) {
	tr, log := loggedTracker(t)
	sentinel := errors.New("a sentinel")
	for _, tc := range []struct {
		name   string
		method string
		value  any
	}{
		{"a string", "Headroom", "boom"},
		{"an error", "Reserved", sentinel},
		{"the same pair again", "Headroom", 42},
		{"an int", "Stats", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() {
				err = track.Guard(tr, &hostilePart{}, tc.method, func() { panic(tc.value) })
			})
			require.ErrorIs(t, err, track.ErrPanic)
			var pe *track.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "*track_test.hostilePart", pe.Part)
			assert.Equal(t, tc.method, pe.Method)
			if e, ok := tc.value.(error); ok && e != nil {
				assert.ErrorIs(t, err, e, "a panic with an error unwraps to it")
			}
		})
	}
	assert.EqualValues(t, 4, tr.Totals().PartPanics, "every panic counted")
	assert.Equal(t, 1, strings.Count(log.String(), "method=Headroom"), "logged once per part and method:\n%s", log)
	assert.Equal(t, 1, strings.Count(log.String(), "method=Reserved"))
	assert.Contains(t, log.String(), "part=*track_test.hostilePart")

	assert.NoError(t, track.Guard(tr, nil, "Fine", func() {}))
	assert.EqualValues(t, 4, tr.Totals().PartPanics, "a call that returns counts nothing")
	err := track.Guard(nil, nil, "Untracked", func() { panic("x") })
	assert.ErrorIs(t, err, track.ErrPanic, "a nil tracker only recovers")
}

func TestNotePanicSurvivesAPanickingLogger(t *testing.T) {
	tr, err := track.New(track.Logger(slog.New(panicHandler{})))
	require.NoError(t, err)
	require.NotPanics(t, func() { tr.Books().NotePanic("part", "Method", "v") })
	assert.EqualValues(t, 1, tr.Totals().PartPanics)
}

type panicHandler struct{ slog.Handler }

func (panicHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panicHandler) Handle(context.Context, slog.Record) error { panic("logger") }

func TestPartInfosClampAndRecover(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		part                   hostilePart
		ok                     bool
		budget, left, reserved int64
	}{
		{"a budget", hostilePart{device: "d", reserved: 10, budget: 100, left: 40}, true, 100, 40, 10},
		{"a negative left under a budget", hostilePart{device: "d", budget: 100, left: -50}, true, 100, 0, 0},
		{"left above the budget", hostilePart{device: "d", budget: 100, left: 500}, true, 100, 100, 0},
		{"device free", hostilePart{device: "d", left: 7}, true, 0, 7, 0},
		{"unknown free", hostilePart{device: "d", left: -1}, true, 0, -1, 0},
		{"a very negative free", hostilePart{device: "d", left: math.MinInt64}, true, 0, -1, 0},
		{"a negative budget", hostilePart{device: "d", budget: -5, left: 3}, true, 0, 3, 0},
		{"a negative reservation", hostilePart{device: "d", reserved: -1 << 62}, true, 0, 0, 0},
		{"PartInfo panics", hostilePart{device: "d", panics: true}, false, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := loggedTracker(t)
			p := tc.part
			track.Attach(tr, &p)
			var parts []track.PartReading
			var skipped []error
			require.NotPanics(t, func() { parts, skipped = tr.Books().PartInfos() })
			if !tc.ok {
				assert.Empty(t, parts)
				require.Len(t, skipped, 1)
				assert.ErrorIs(t, skipped[0], track.ErrPanic)
				assert.EqualValues(t, 1, tr.Totals().PartPanics)
				return
			}
			assert.Empty(t, skipped)
			require.Len(t, parts, 1)
			assert.Same(t, &p, parts[0].Part)
			assert.Equal(t, "d", parts[0].Device)
			assert.Equal(t, tc.budget, parts[0].Budget)
			assert.Equal(t, tc.left, parts[0].Left)
			assert.Equal(t, tc.reserved, parts[0].Reserved)
			assert.Zero(t, tr.Totals().PartPanics)
		})
	}
}

func TestReservedOnSkipsPanickingPartsAndSaturates(t *testing.T) {
	tr, _ := loggedTracker(t)
	parts := []*hostilePart{
		{device: "gpu", reserved: 1 << 62},
		{device: "gpu", reserved: 1 << 62},
		{device: "gpu", reserved: 1 << 62, panics: true},
		{device: "gpu", reserved: -1 << 62},
		{device: "other", reserved: 5},
	}
	for _, p := range parts {
		track.Attach(tr, p)
	}
	var got int64
	require.NotPanics(t, func() { got = tr.ReservedOn("gpu") })
	assert.Equal(t, int64(math.MaxInt64), got, "two claims of 2^62 saturate; a negative one reads as 0")
	assert.EqualValues(t, 5, tr.ReservedOn("other"))
	assert.EqualValues(t, 2, tr.Totals().PartPanics, "the panicking part counted each time it was asked")
	runtime.KeepAlive(parts)
}
