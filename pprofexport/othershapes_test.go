package pprofexport_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// A site with more shapes than it counts apart shows its first 64 shapes
// in the default profile and the rest in one sample labelled "other
// shapes", without a per-tensor size, which those tensors do not share;
// the site's bytes add up either way.
func TestTheDefaultProfileBoundsShapesPerSite(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	recs := make([]track.Record, 100)
	var want int64
	for i := range recs {
		recs[i] = track.Record{Bytes: int64(i+1) * 8, Meta: track.InternMeta("kv", "host", "float16", []int{i + 1, 4})}
		want += recs[i].Bytes
	}
	for i := range recs {
		require.NoError(t, tr.Books().Record(context.Background(), &recs[i], 0)) // one line: one site
	}
	snap, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, pprofexport.Write(&buf, snap))
	written, err := profile.Parse(&buf)
	require.NoError(t, err)
	built, err := pprofexport.Profile(snap)
	require.NoError(t, err)
	for name, p := range map[string]*profile.Profile{"written": written, "built": built} {
		checkOtherShapes(t, name, p, want)
	}
	for i := range recs {
		require.NoError(t, (&recs[i]).Release())
	}
}

// checkOtherShapes checks that p shows 64 shapes and one other-shapes
// sample of the 36 tensors past them, want bytes in all.
func checkOtherShapes(t *testing.T, name string, p *profile.Profile, want int64) {
	t.Helper()
	inuse := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			inuse = i
		}
	}
	require.GreaterOrEqual(t, inuse, 0)
	var total int64
	shapes, other := 0, 0
	for _, s := range p.Sample {
		total += s.Value[inuse]
		if s.Value[inuse] == 0 {
			continue
		}
		if s.Label[pprofexport.LabelShape][0] == pprofexport.OtherShapes {
			other++
			assert.Equal(t, int64(36*(65+100)*4), s.Value[inuse], name)
			assert.Empty(t, s.NumLabel[pprofexport.LabelBytes], "%s: the other shapes' tensors differ in size", name)
			continue
		}
		shapes++
	}
	assert.Equal(t, 64, shapes, name)
	assert.Equal(t, 1, other, name)
	assert.Equal(t, want, total, name)
}
