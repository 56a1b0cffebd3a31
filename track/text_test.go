package track_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// recordOn records a tensor of kind on device under ctx.
func recordOn(t *testing.T, tr *track.Tracker, ctx context.Context, kind, device string) *track.Record {
	t.Helper()
	r := &track.Record{Bytes: 8, Meta: track.InternMeta(kind, device, "float32", []int{2})}
	require.NoError(t, tr.Books().Record(ctx, r, 0))
	return r
}

// Every text tensorlife writes is valid UTF-8 and bounded, whatever a
// caller or a part put in it: labels (their text and the kinds made of
// them), a Meta's kind and device (profiles' labels, metric attributes),
// and a panic's value in errors and logs.
func TestEveryTextIsValidAndBounded(t *testing.T) {
	bad := "a\xffb" + strings.Repeat("\xfe", 1<<20) // invalid, and 1 MiB
	var logged bytes.Buffer
	tr := newTracker(t, track.RequestKinds("route"), track.Logger(slog.New(slog.NewJSONHandler(&logged, nil))))

	t.Run("labels", func(t *testing.T) {
		l := track.NewLabels("route", bad, bad, "v")
		for _, s := range []string{l.String()} {
			assert.True(t, utf8.ValidString(s))
			assert.Less(t, len(s), 4<<10)
		}
		l.Range(func(k, v string) bool {
			assert.True(t, utf8.ValidString(k) && utf8.ValidString(v))
			assert.LessOrEqual(t, len(k)+len(v), 512)
			return true
		})
	})
	t.Run("kinds", func(t *testing.T) {
		ctx, end := track.WithRequest(context.Background())
		r := recordOn(t, tr, track.WithLabels(ctx, "route", bad), "tensor", "host")
		end()
		require.NoError(t, r.Release())
		costs := tr.RequestCosts()
		require.NotEmpty(t, costs)
		for _, c := range costs {
			assert.True(t, utf8.ValidString(c.Kind), "a metric attribute")
			assert.LessOrEqual(t, len(c.Kind), track.MaxKindText)
		}
	})
	t.Run("meta", func(t *testing.T) {
		m := track.InternMeta(bad, bad, bad, []int{1})
		for _, s := range []string{m.Kind, m.Device, m.DType} {
			assert.True(t, utf8.ValidString(s))
			assert.LessOrEqual(t, len(s), track.MaxMetaText)
		}
	})
	t.Run("panic", func(t *testing.T) {
		logged.Reset()
		err := track.Guard(tr, &struct{ _ int }{}, "Stats", func() { panic(bad) })
		require.ErrorIs(t, err, track.ErrPanic)
		assert.True(t, utf8.ValidString(err.Error()))
		assert.Less(t, len(err.Error()), 1<<10)
		var rec map[string]any
		require.NoError(t, json.Unmarshal(logged.Bytes(), &rec), "one log line")
		p, _ := rec["panic"].(string)
		assert.True(t, utf8.ValidString(p))
		assert.LessOrEqual(t, len(p), 256, "NotePanic logs the value cut")

		// A panic value whose own Error panics is named, not rethrown.
		err = track.Guard(tr, &struct{ _ int }{}, "Reserved", func() { panic(badError{}) })
		assert.Contains(t, err.Error(), "panicked")
	})
}

type badError struct{}

func (badError) Error() string { panic(errors.New("badError.Error")) }

// 2,000 device names make at most 2 × MaxRequestKinds rows of request
// kinds, not 2,000 "other" rows.
func TestRequestKindRowsAreBoundedAcrossDevices(t *testing.T) {
	tr := newTracker(t, track.RequestKinds("route"))
	for i := range 2000 {
		ctx, end := track.WithRequest(context.Background())
		r := recordOn(t, tr, track.WithLabels(ctx, "route", "r"+strconv.Itoa(i%100)), "tensor", "dev"+strconv.Itoa(i))
		end()
		require.NoError(t, r.Release())
	}
	costs := tr.RequestCosts()
	assert.LessOrEqual(t, len(costs), 2*track.MaxRequestKinds)
	var requests int64
	for _, c := range costs {
		requests += c.Requests
	}
	assert.Equal(t, int64(2000), requests, "every request counted in some row")
}
