package track_test

import (
	"context"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// Each entry point answers its bad input with the typed error the package
// doc lists for it, and never panics.
func TestBadInputGetsTypedErrors(t *testing.T) {
	tr := newTracker(t)
	ctx := context.Background()
	released := recordA(tr, ctx, 8, "tensor")
	require.NoError(t, released.Release())
	live := recordA(tr, ctx, 8, "tensor")
	t.Cleanup(func() { require.NoError(t, live.Release()) })

	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"New: zero MaxSites", func() error { _, err := track.New(track.MaxSites(0)); return err }, track.ErrInvalidOption},
		{"New: empty Name", func() error { _, err := track.New(track.Name("")); return err }, track.ErrInvalidOption},
		{"New: nil OnLeak", func() error { _, err := track.New(track.OnLeak(nil)); return err }, track.ErrInvalidOption},
		{"New: nil Logger", func() error { _, err := track.New(track.Logger(nil)); return err }, track.ErrInvalidOption},
		{"New: nil option", func() error { _, err := track.New(nil); return err }, track.ErrInvalidOption},
		{"AdapterPackages: a space", func() error { return track.AdapterPackages("not a path/") }, track.ErrInvalidOption},
		{"SnapshotOf: negative MinAge", func() error { _, err := tr.SnapshotOf(track.Filter{MinAge: -1}); return err }, track.ErrInvalidOption},
		{"SnapshotOf: Outlived and InFlight", func() error {
			_, err := tr.SnapshotOf(track.Filter{Outlived: true, InFlight: true})
			return err
		}, track.ErrInvalidOption},
		{"SnapshotOf: a Request under no request", func() error {
			_, err := tr.SnapshotOf(track.Filter{Request: ctx})
			return err
		}, track.ErrInvalidOption},
		{"GroupsOf: negative MinAge", func() error { _, _, err := tr.Books().GroupsOf(track.Filter{MinAge: -1}); return err }, track.ErrInvalidOption},
		{"Record: nil", func() error { return tr.Books().Record(ctx, nil, 0) }, track.ErrMisuse},
		{"Record: negative bytes", func() error { return tr.Books().Record(ctx, &track.Record{Bytes: -1}, 0) }, track.ErrMisuse},
		{"Record: recorded already", func() error { return tr.Books().Record(ctx, live, 0) }, track.ErrMisuse},
		{"Release: nil", func() error { return (*track.Record)(nil).Release() }, track.ErrMisuse},
		{"Release: never recorded", func() error { return (&track.Record{}).Release() }, track.ErrMisuse},
		{"Release: released", released.Release, track.ErrMisuse},
		{"SetLabels: released", func() error { return released.SetLabels(track.NewLabels("k", "v")) }, track.ErrMisuse},
		{"HandOver: nil owner", func() error { return live.HandOver(nil) }, track.ErrMisuse},
		{"HandOver: released", func() error { return released.HandOver(&track.Owner{Name: "cache"}) }, track.ErrMisuse},
		{"HandBack: not handed over", func() error { return live.HandBack(&track.Owner{Name: "cache"}) }, track.ErrMisuse},
		{"HandBackDropped: not handed over", func() error { return live.HandBackDropped(weak.Pointer[track.Owner]{}) }, track.ErrMisuse},
		{"History: none kept", func() error { _, err := tr.History(); return err }, track.ErrHistoryOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

// A nil function given where tensorlife would call it is nothing to call:
// no entry point panics on it, then or later.
func TestNilFunctionsAreNothingToCall(t *testing.T) {
	tr := newTracker(t)
	bk := tr.Books()
	assert.Nil(t, track.Read[track.Part](tr, "PartInfo", nil), "a nil read reads nothing")
	assert.Nil(t, track.Read(nil, "PartInfo", func(track.Part) { t.Fatal("read a nil tracker's part") }))
	track.NewLabels("a", "1").Range(nil)
	bk.FindHandlesWith(nil)
	assert.Nil(t, bk.LiveHandles(1), "no finder: no handles")
	assert.False(t, track.AfterRequest(context.Background(), nil)(), "nothing armed, nothing stopped")
	for name, l := range map[string]*track.Local[int]{
		"nil maker":    track.NewLocal[int](nil),
		"maker of nil": track.NewLocal(func() *int { return nil }),
	} {
		v, err := l.Of(tr)
		require.NoError(t, err, name)
		require.NotNil(t, v, name)
		assert.Zero(t, *v, name)
	}
}
