// Package histogram is the fixed log-scale histogram behind the request
// costs of a tracker and the peaks a pool admits by: bounded whatever the
// values, with percentiles read to within one bucket and the maximum exact.
//
// Below 8 a bucket holds one value; above, each power of two is split into
// 8 buckets, so a bucket is at most 1/8 of its low bound wide. Each bucket
// keeps its count and the largest value it saw, and a percentile is the
// largest value seen in the bucket that holds it: exact when that bucket saw
// one value, and never below the true percentile's bucket.
//
// A Histogram is a plain value of about 8 KiB with no lock: its owner
// guards it.
package histogram

import (
	"math"
	"math/bits"
)

// subBucketBits sets how many buckets a power of two is split into, 8:
// each at most 1/8 of its low bound wide.
const subBucketBits = 3

const (
	subBuckets = 1 << subBucketBits
	// Buckets is how many buckets a Histogram has: every int64 ≥ 0 falls
	// in one.
	Buckets = subBuckets + (63-subBucketBits)*subBuckets
)

// Histogram counts non-negative values in fixed log-scale buckets. The
// zero value is empty and ready to use.
type Histogram struct {
	counts [Buckets]int64
	maxes  [Buckets]int64
	n, max int64
}

// Bucket is one bucket of a histogram: the values in [Low, High) it
// counted, and the largest of them.
type Bucket struct {
	Low, High  int64
	Count, Max int64
}

// bucketOf returns the bucket of v ≥ 0.
func bucketOf(v int64) int {
	if v < subBuckets {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // subBucketBits..62
	m := int(v >> (e - subBucketBits))
	return (e-subBucketBits)*subBuckets + m
}

// bucketLow returns the lowest value of bucket i.
func bucketLow(i int) int64 {
	if i < subBuckets {
		return int64(i)
	}
	e := i/subBuckets - 1 + subBucketBits
	m := int64(i%subBuckets + subBuckets)
	return m << (e - subBucketBits)
}

// Add counts v; a negative v counts as 0.
func (h *Histogram) Add(v int64) {
	v = max(v, 0)
	i := bucketOf(v)
	h.counts[i]++
	h.maxes[i] = max(h.maxes[i], v)
	h.n++
	h.max = max(h.max, v)
}

// Count returns how many values h counted.
func (h *Histogram) Count() int64 { return h.n }

// Max returns the largest value h counted, exact; 0 for none.
func (h *Histogram) Max() int64 { return h.max }

// Quantile returns the largest value seen in the bucket holding the
// q-quantile (the value at rank ⌈q·n⌉); 0 for no values.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return h.maxes[i]
		}
	}
	return h.max
}

// Buckets returns the buckets that counted any value, smallest first.
func (h *Histogram) Buckets() []Bucket {
	var out []Bucket
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		high := int64(1<<63 - 1)
		if i+1 < Buckets {
			high = bucketLow(i + 1)
		}
		out = append(out, Bucket{Low: bucketLow(i), High: high, Count: c, Max: h.maxes[i]})
	}
	return out
}
