package pprofexport_test

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

//go:noinline
func activation(ctx context.Context, tr *track.Tracker) *track.Record {
	r := &track.Record{Bytes: 64 << 10, Meta: track.InternMeta("activation", "host", "float16", nil)}
	if err := tr.Books().Record(ctx, r, 0); err != nil {
		panic(err)
	}
	return r
}

//go:noinline
func keepSmallState(ctx context.Context, tr *track.Tracker) *track.Record {
	r := &track.Record{Bytes: 256, Meta: track.InternMeta("state", "host", "float32", nil)}
	if err := tr.Books().Record(ctx, r, 0); err != nil {
		panic(err)
	}
	return r
}

// sparseSlowLeak runs 500 requests through tr, each under its own request
// scope: every request has 40 to 60 transient 64 KiB activations, every
// 10th keeps a 256 B tensor forever. It returns with the last request in
// flight, its activations live, and a function that ends it.
func sparseSlowLeak(t *testing.T, tr *track.Tracker) (end func()) {
	rng := rand.New(rand.NewPCG(1, 2))
	var kept, live []*track.Record
	for i := range 500 {
		ctx, endRequest := track.WithRequest(context.Background())
		live = live[:0]
		for range 40 + rng.IntN(21) {
			live = append(live, activation(ctx, tr))
		}
		if i%10 == 0 {
			kept = append(kept, keepSmallState(ctx, tr))
		}
		if i == 499 {
			break
		}
		for _, r := range live {
			require.NoError(t, r.Release())
		}
		endRequest()
	}
	return func() {
		for _, r := range append(live, kept...) {
			require.NoError(t, r.Release())
		}
	}
}

func TestOldLeakViewPutsTheSlowLeakFirst(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	end := sparseSlowLeak(t, tr)
	defer end()
	const leak, transient = pkgPath + "keepSmallState", pkgPath + "activation"
	dir := t.TempDir()
	top := func(path string, opts ...pprofexport.ProfileOption) string {
		t.Helper()
		require.NoError(t, pprofexport.WriteFile(path, tr.Snapshot(), opts...))
		out, err := runPprof(t, "-top", "-sample_index=inuse_space", path)
		require.NoError(t, err)
		return firstTopRow(t, out)
	}
	assert.Equal(t, transient, top(filepath.Join(dir, "all.pb.gz")), "the control: in-flight memory hides the leak")
	assert.Equal(t, leak, top(filepath.Join(dir, "old.pb.gz"), pprofexport.Outlived()), "WriteFile with Outlived")

	h, err := pprofexport.NewHandler(tr)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct{ query, want string }{
		{"", transient},
		{"?outlived=1", leak},
	} {
		out, err := runPprof(t, "-top", "-sample_index=inuse_space", srv.URL+"/debug/pprof/tensors"+tc.query)
		require.NoError(t, err)
		assert.Equal(t, tc.want, firstTopRow(t, out), "query %q:\n%s", tc.query, out)
	}
}

func TestOldLeakOptions(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	end := sparseSlowLeak(t, tr)
	defer end()
	snap, err := tr.SnapshotOf(track.Filter{})
	require.NoError(t, err)
	_, err = pprofexport.Profile(snap, pprofexport.Outlived())
	assert.ErrorIs(t, err, pprofexport.ErrInvalidOption, "a snapshot without its allocations cannot be narrowed")
	assert.ErrorIs(t, err, track.ErrInvalidOption)
	for _, o := range []pprofexport.ProfileOption{pprofexport.MinAge(-1)} {
		_, err := pprofexport.Profile(tr.Snapshot(), o)
		assert.ErrorIs(t, err, pprofexport.ErrInvalidOption)
	}

	p, err := pprofexport.Profile(tr.Snapshot(), pprofexport.Outlived())
	require.NoError(t, err)
	var objects int64
	for _, s := range p.Sample {
		objects += s.Value[2]
	}
	assert.Equal(t, int64(50), objects, "the 50 kept tensors, no activation")
}
