package track

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordAt records a record of bytes and m at site, as Record does after
// capturing the stack.
func recordAt(t *testing.T, tr *Tracker, site *Site, m *Meta, bytes int64) *Record {
	t.Helper()
	r := &Record{Bytes: bytes, Meta: m}
	require.NoError(t, tr.admitNew(r))
	tr.insert(context.Background(), r, site)
	return r
}

// A site's live count is made minus released, two counters. A reader
// paused between its loads of them, while the line makes and releases
// records, must still read the count of one moment: here the pause is
// forced (betweenReads), and five records are made and released in it at
// a line that holds one record throughout. Read made then released once
// each (in either order), the line would read as holding six or as
// holding a negative count; read at one moment, it holds one. Each case
// pauses the reader in the counter the records go to: a slot's, and the
// other shapes' of a site whose slots are all taken. Each reader of the
// counters is asked: the site's Stats and the default profile's snapshot
// (read from the counters, as the out-of-memory error's copy is).
func TestALiveCountReadAcrossAPauseIsOneMoments(t *testing.T) {
	m := InternMeta("tensor", "host", "uint8", []int{64})
	readers := map[string]func(tr *Tracker, s *Site) (count, bytes, made int64){
		"Stats": func(_ *Tracker, s *Site) (int64, int64, int64) {
			st := s.Stats()
			return st.LiveCount, st.LiveBytes, st.AllocCount
		},
		"counted snapshot": func(tr *Tracker, s *Site) (int64, int64, int64) {
			snap, err := tr.SnapshotOf(Filter{LabelKeys: []string{}}) // the counted filter
			require.NoError(t, err)
			require.True(t, snap.Filter.counted())
			st := siteIn(t, snap, s)
			return st.LiveCount, st.LiveBytes, st.AllocCount
		},
	}
	for _, other := range []bool{false, true} {
		for name, read := range readers {
			t.Run(map[bool]string{false: "slot", true: "other shapes"}[other]+"/"+name, func(t *testing.T) {
				tr, err := New(OnLeak(func(LeakReport) {}))
				require.NoError(t, err)
				site := tr.Books().Caller(0, 1)
				size := int64(64)
				if other { // take every slot, so that what follows is counted apart
					for i := range maxSiteMetas {
						require.NoError(t, recordAt(t, tr, site, m, int64(1000+i)).Release())
					}
					require.Equal(t, otherSlot, site.metas.slot(m, size))
				}
				held := recordAt(t, tr, site, m, size)
				made := site.metas.allocated()
				target := &site.metas.inline[0].allocs
				if other {
					target = &site.metas.other.allocs
				}
				var paused atomic.Int64
				hook := func(c *atomic.Int64) {
					if c != target || paused.Add(1) != 1 {
						return // once, in the counter the records go to
					}
					for range 5 {
						require.NoError(t, recordAt(t, tr, site, m, size).Release())
					}
				}
				betweenReads.Store(&hook)
				defer betweenReads.Store(nil)

				count, bytes, allocs := read(tr, site)
				require.NotZero(t, paused.Load(), "the reader was paused in the records' counter")
				assert.EqualValues(t, 1, count, "the line holds one record throughout")
				assert.EqualValues(t, size, bytes)
				assert.Contains(t, []int64{made, made + 5}, allocs, "made: before or after the pause")
				betweenReads.Store(nil)
				require.NoError(t, held.Release())
				st := site.Stats()
				assert.Zero(t, st.LiveCount)
				assert.EqualValues(t, made+5, st.AllocCount)
			})
		}
	}
}

// siteIn returns s's figures in snap.
func siteIn(t *testing.T, snap *Snapshot, s *Site) SiteStats {
	t.Helper()
	for _, st := range snap.Sites {
		if st.Site == s {
			return st
		}
	}
	require.Failf(t, "site not in the snapshot", "%v", s)
	return SiteStats{}
}
