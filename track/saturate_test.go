package track_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// huge is a record's size near MaxInt64, as a hostile allocator claims.
const huge = math.MaxInt64 - 7

// Every sum saturates, and no figure that cannot be negative reads
// negative: records whose bytes add up past MaxInt64 read MaxInt64 in
// every figure that sums them (the tracker's totals, a site's live and
// outlived bytes, a request's in-flight bytes and their sum, an owner's
// books, a kind's outlived bytes), and the figures are exact again once
// the records go.
func TestEverySumSaturates(t *testing.T) {
	tr := newTracker(t, track.RequestKinds("kind"))
	// Two records: a running sum on the record path is exact modulo 2^64
	// (counter.Live), so it reads MaxInt64 from MaxInt64 to 2^64.
	const n = 2
	ctx, end := track.WithRequest(context.Background())
	ctx = track.WithLabels(ctx, "kind", "huge")
	var rs []*track.Record
	for range n {
		rs = append(rs, recordA(tr, ctx, huge, "tensor"))
	}
	tot := tr.Totals()
	assert.Equal(t, int64(math.MaxInt64), tot.LiveBytes)
	assert.Equal(t, int64(math.MaxInt64), tot.AllocBytes)
	assert.Equal(t, int64(n), tot.LiveCount)
	open := tr.OpenRequests(5)
	assert.Equal(t, int64(math.MaxInt64), open.InFlightBytes, "a request's in-flight bytes and the sum")
	require.NotEmpty(t, open.Largest)
	assert.Equal(t, int64(math.MaxInt64), open.Largest[0].InFlightBytes)
	site := rs[0].Site().Stats()
	assert.Equal(t, int64(math.MaxInt64), site.LiveBytes)
	assert.Equal(t, int64(math.MaxInt64), site.AllocBytes)

	end() // all outlive it
	assert.Equal(t, int64(math.MaxInt64), tr.Totals().OutlivedBytes)
	assert.Equal(t, int64(math.MaxInt64), rs[0].Site().Stats().OutlivedBytes)
	costs := tr.RequestCosts()
	require.Len(t, costs, 1)
	assert.Equal(t, int64(math.MaxInt64), costs[0].OutlivedBytes, "a kind's outlived bytes")

	o := &track.Owner{Name: "hoard", MaxBytes: 1}
	for _, r := range rs {
		require.NoError(t, r.HandOver(o))
	}
	owners := tr.Owners()
	require.Len(t, owners, 1)
	assert.Equal(t, int64(math.MaxInt64), owners[0].Bytes, "an owner's books")
	require.Len(t, owners[0].Sites, 1)
	assert.Equal(t, int64(math.MaxInt64), owners[0].Sites[0].Bytes)
	assert.True(t, owners[0].OverBound())

	// Exact again: one record left is its bytes, in every figure.
	for _, r := range rs[1:] {
		require.NoError(t, r.HandBack(o))
	}
	owners = tr.Owners()
	require.Len(t, owners, 1)
	assert.Equal(t, int64(huge), owners[0].Bytes)
	release(t, tr, rs[1:]...)
	tot = tr.Totals()
	assert.Equal(t, int64(huge), tot.LiveBytes)
	assert.Equal(t, int64(huge), rs[0].Site().Stats().LiveBytes)
	require.NoError(t, rs[0].HandBack(o))
	assert.Equal(t, int64(huge), tr.Totals().OutlivedBytes)
	release(t, tr, rs[0])
	tot = tr.Totals()
	assert.Zero(t, tot.LiveBytes)
	assert.Zero(t, tot.OutlivedBytes)
	assert.Empty(t, tr.Owners())
}

// Sums over many requests saturate alike.
func TestOpenRequestsSumSaturates(t *testing.T) {
	tr := newTracker(t)
	var rs []*track.Record
	var ends []func()
	for i := range 4 {
		ctx, end := track.WithRequest(context.Background())
		ctx = track.WithLabels(ctx, "i", strconv.Itoa(i))
		rs = append(rs, recordA(tr, ctx, huge, "tensor"))
		ends = append(ends, end)
	}
	open := tr.OpenRequests(2)
	assert.Equal(t, int64(math.MaxInt64), open.InFlightBytes)
	assert.GreaterOrEqual(t, open.OthersBytes, int64(0))
	release(t, tr, rs...)
	for _, end := range ends {
		end()
	}
}
