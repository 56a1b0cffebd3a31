package track

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Three open requests of 3/8 × 2^64 bytes each in one book shard hold
// 9/8 × 2^64 bytes: the shard's sum, and the open requests' in-flight
// figure, read MaxInt64, never the 2^61 an int64 sum wraps to.
func TestBookShardSumsPastMaxInt64Saturate(t *testing.T) {
	tr, err := New()
	require.NoError(t, err)
	const big = 3 << 61 // 3/8 × 2^64, below MaxInt64
	var recs []*Record
	want := -1
	for n := 0; len(recs) < 3; n++ {
		require.Less(t, n, 10_000, "no three contexts fell in one shard")
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		sh := shardOfDone(ctx.Done())
		if want == -1 {
			want = sh
		}
		if sh != want {
			continue
		}
		r := &Record{Bytes: big}
		require.NoError(t, tr.Books().Record(WithLabels(ctx, "request", "big"), r, 0))
		recs = append(recs, r)
	}
	open := tr.OpenRequests(3)
	assert.Equal(t, 3, open.Count)
	assert.Equal(t, int64(math.MaxInt64), open.InFlightBytes)
	for _, r := range recs {
		require.NoError(t, r.Release())
	}
	assert.Zero(t, tr.OpenRequests(3).InFlightBytes, "and back to exact once released")
}
