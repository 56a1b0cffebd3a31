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

// recordBytes is how many input bytes describe one record in FuzzProfile.
const recordBytes = 5

// FuzzProfile builds snapshots from random records (sizes, kinds, dtypes,
// shapes, labels, call sites, frees, GC-found leaks, a full stack table and
// a filter) and checks that the profile is valid, that its totals are the
// snapshot's, and that it survives being written and parsed back.
func FuzzProfile(f *testing.F) {
	f.Add([]byte{0x01, 0x02, 0x03, 0x04, 0x05}, byte(0))
	f.Add([]byte("masks and kv-cache blocks, some freed, some leaked"), byte(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 7, 7, 7, 7, 7}, byte(6))
	f.Add([]byte{}, byte(3))
	f.Fuzz(func(t *testing.T, data []byte, filterBits byte) {
		// A small stack table, so that some records overflow it.
		tr, err := track.New(track.MaxSites(4), track.ReclaimLeaks(false), track.OnLeak(func(track.LeakReport) {}))
		require.NoError(t, err)
		kinds := []string{"tensor", "mask", "kv-cache", ""}
		dtypes := []string{"bool", "float32", "bfloat16", ""}
		labelKeys := []string{"request", "kind", "model", ""}

		n := min(len(data)/recordBytes, 64)
		recs := make([]track.Record, n)
		released := make([]bool, n)
		for i := range recs {
			b := data[recordBytes*i : recordBytes*(i+1)]
			recs[i] = track.Record{Bytes: int64(b[0]) << (b[1] % 40), Meta: track.InternMeta(kinds[b[1]>>6], dtypes[b[2]>>6]+"dev", dtypes[b[2]&3], []int{int(b[2]), int(b[3]) - 128}[:b[4]%3])}
			ctx := context.Background()
			if b[3]%3 == 0 {
				// Label values come straight from the input: any bytes at all.
				ctx = track.WithLabels(ctx, labelKeys[b[4]&3], string(data[:b[4]%8]))
			}
			require.NoError(t, recordAt(ctx, tr, recs[i:i+1], uint(b[0]), 3))
			if b[3]%5 == 0 {
				(&recs[i]).ReportDropped(nil, "")
			}
			if b[4]%4 == 1 {
				require.NoError(t, (&recs[i]).Release())
				released[i] = true
			}
		}
		defer func() {
			for i := range recs {
				if !released[i] {
					assert.NoError(t, (&recs[i]).Release())
				}
			}
		}()

		filter := track.Filter{Kind: kinds[filterBits&3], LeakedOnly: filterBits&4 != 0}
		snap, err := tr.SnapshotOf(filter)
		require.NoError(t, err)
		p, err := pprofexport.Profile(snap)
		require.NoError(t, err)
		require.NoError(t, p.CheckValid())

		var want [4]int64
		for _, g := range snap.Groups {
			want[inuseObjects] += g.Count
			want[inuseSpace] += g.Bytes
		}
		for _, s := range snap.Sites {
			if filter.Active() && s.LiveCount == 0 {
				continue // a filtered profile shows allocs of selected sites only
			}
			want[allocObjects] += s.AllocCount
			want[allocSpace] += s.AllocBytes
		}
		assert.Equal(t, want, totals(p), "the profile holds exactly the snapshot's figures")

		var buf bytes.Buffer
		require.NoError(t, pprofexport.Write(&buf, snap))
		back, err := profile.Parse(&buf)
		require.NoError(t, err)
		require.NoError(t, back.CheckValid())
		require.Len(t, back.Sample, len(p.Sample))
		assert.Equal(t, want, totals(back))
		for i, s := range p.Sample {
			assert.Equal(t, s.Value, back.Sample[i].Value)
			assert.Equal(t, orNil(s.Label), orNil(back.Sample[i].Label))
			assert.Equal(t, orNil(s.NumLabel), orNil(back.Sample[i].NumLabel))
			assert.Equal(t, stackNames(s), stackNames(back.Sample[i]))
		}

		require.NoError(t, pprofexport.WriteText(&bytes.Buffer{}, snap))
		diff, err := pprofexport.DiffProfile(snap, snap)
		require.NoError(t, err)
		assert.Empty(t, diff.Sample, "a snapshot minus itself is nothing")
		buf.Reset()
		require.NoError(t, pprofexport.WriteDiff(&buf, snap, snap))
		written, err := profile.Parse(&buf)
		require.NoError(t, err)
		require.NoError(t, written.CheckValid())
		assert.Empty(t, written.Sample, "written, a snapshot minus itself is nothing too")
		assert.Empty(t, written.Location, "and uses no stack")

		// What changed when some are freed: written as DiffProfile builds it.
		for i := range recs {
			if !released[i] && data[recordBytes*i]%2 == 0 {
				require.NoError(t, (&recs[i]).Release())
				released[i] = true
			}
		}
		later, err := tr.SnapshotOf(filter)
		require.NoError(t, err)
		built, err := pprofexport.DiffProfile(snap, later)
		require.NoError(t, err)
		var builtBuf bytes.Buffer
		require.NoError(t, built.Write(&builtBuf))
		buf.Reset()
		require.NoError(t, pprofexport.WriteDiff(&buf, snap, later))
		builtBack, err := profile.ParseData(builtBuf.Bytes())
		require.NoError(t, err)
		written, err = profile.ParseData(buf.Bytes())
		require.NoError(t, err)
		assert.Equal(t, canonical(t, builtBack), canonical(t, written), "the written diff is DiffProfile's")
	})
}

func totals(p *profile.Profile) [4]int64 {
	var t [4]int64
	for _, s := range p.Sample {
		for i := range t {
			t[i] += s.Value[i]
		}
	}
	return t
}

// orNil makes an empty map nil: parsing leaves a sample without labels with
// nil maps.
func orNil[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

func stackNames(s *profile.Sample) []string {
	var names []string
	for _, l := range s.Location {
		for _, ln := range l.Line {
			names = append(names, ln.Function.Name)
		}
	}
	return names
}
