package histogram

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every value falls in the bucket whose bounds hold it, and a bucket is at
// most 1/8 of its low bound wide.
func TestBucketsCoverEveryValue(t *testing.T) {
	values := []int64{0, 1, 7, 8, 9, 15, 16, 17, 1000, 1 << 20, 1<<20 + 1, math.MaxInt64 / 4, math.MaxInt64}
	for _, v := range values {
		i := bucketOf(v)
		require.Less(t, i, Buckets, "%d", v)
		low := bucketLow(i)
		assert.LessOrEqual(t, low, v, "%d in bucket %d", v, i)
		if i+1 < Buckets {
			high := bucketLow(i + 1)
			assert.Less(t, v, high, "%d in bucket %d", v, i)
			assert.LessOrEqual(t, float64(high-low), float64(low)/8+1, "bucket %d [%d, %d)", i, low, high)
		}
	}
	for i := 1; i < Buckets; i++ {
		assert.Equal(t, i, bucketOf(bucketLow(i)), "the low bound of bucket %d is its own", i)
		assert.Equal(t, i-1, bucketOf(bucketLow(i)-1), "the value below bucket %d is the bucket before", i)
	}
}

// Percentiles are the largest value seen in their bucket; the max is exact.
func TestQuantiles(t *testing.T) {
	var h Histogram
	assert.Zero(t, h.Quantile(0.5))
	assert.Empty(t, h.Buckets())
	for range 60 {
		h.Add(1 << 20)
	}
	for range 39 {
		h.Add(2 << 20)
	}
	h.Add(8<<20 + 5)
	h.Add(-3) // counts as 0
	assert.Equal(t, int64(101), h.Count())
	assert.Equal(t, int64(1<<20), h.Quantile(0.5))
	assert.Equal(t, int64(2<<20), h.Quantile(0.99))
	assert.Equal(t, int64(8<<20+5), h.Max())
	assert.Equal(t, int64(8<<20+5), h.Quantile(1))
	b := h.Buckets()
	require.Len(t, b, 4)
	assert.Equal(t, Bucket{Low: 0, High: 1, Count: 1, Max: 0}, b[0])
	assert.Equal(t, int64(60), b[1].Count)
	assert.Equal(t, int64(1<<20), b[1].Low)
	assert.Equal(t, int64(8<<20+5), b[3].Max)
}
