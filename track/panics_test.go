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
// and whose methods panic when told to.
type hostilePart struct {
	device        string
	reserved      int64
	budget, left  int64
	panicReserved bool
	panicHeadroom bool
	panicValue    any
}

func (p *hostilePart) Reserved() (string, int64) {
	if p.panicReserved {
		panic(p.value())
	}
	return p.device, p.reserved
}

func (p *hostilePart) Headroom() (int64, int64) {
	if p.panicHeadroom {
		panic(p.value())
	}
	return p.budget, p.left
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
	require.NotPanics(t, func() { tr.NotePanic("part", "Method", "v") })
	assert.EqualValues(t, 1, tr.Totals().PartPanics)
}

type panicHandler struct{ slog.Handler }

func (panicHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panicHandler) Handle(context.Context, slog.Record) error { panic("logger") }

func TestReadHeadroomAndReservedClampAndRecover(t *testing.T) {
	for _, tc := range []struct {
		name         string
		part         hostilePart
		ok           bool
		budget, left int64
		reservedOK   bool
		reserved     int64
	}{
		{"a budget", hostilePart{device: "d", reserved: 10, budget: 100, left: 40}, true, 100, 40, true, 10},
		{"a negative left under a budget", hostilePart{device: "d", budget: 100, left: -50}, true, 100, 0, true, 0},
		{"left above the budget", hostilePart{device: "d", budget: 100, left: 500}, true, 100, 100, true, 0},
		{"device free", hostilePart{device: "d", left: 7}, true, 0, 7, true, 0},
		{"unknown free", hostilePart{device: "d", left: -1}, true, 0, -1, true, 0},
		{"a very negative free", hostilePart{device: "d", left: math.MinInt64}, true, 0, -1, true, 0},
		{"a negative budget", hostilePart{device: "d", budget: -5, left: 3}, true, 0, 3, true, 0},
		{"a negative reservation", hostilePart{device: "d", reserved: -1 << 62}, true, 0, 0, true, 0},
		{"Headroom panics", hostilePart{device: "d", panicHeadroom: true}, false, 0, -1, true, 0},
		{"Reserved panics", hostilePart{device: "d", panicReserved: true}, true, 0, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := loggedTracker(t)
			p := tc.part
			var budget, left int64
			var ok bool
			require.NotPanics(t, func() { budget, left, ok = tr.ReadHeadroom(&p) })
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.budget, budget)
			assert.Equal(t, tc.left, left)
			d, reserved, rok := tr.ReadReserved(&p)
			assert.Equal(t, tc.reservedOK, rok)
			assert.Equal(t, tc.reserved, reserved)
			if rok {
				assert.Equal(t, "d", d)
			}
			panics := int64(0)
			if !tc.ok || !tc.reservedOK {
				panics = 1
			}
			assert.Equal(t, panics, tr.Totals().PartPanics)
		})
	}
}

func TestReservedOnSkipsPanickingPartsAndSaturates(t *testing.T) {
	tr, _ := loggedTracker(t)
	parts := []*hostilePart{
		{device: "gpu", reserved: 1 << 62},
		{device: "gpu", reserved: 1 << 62},
		{device: "gpu", reserved: 1 << 62, panicReserved: true},
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
