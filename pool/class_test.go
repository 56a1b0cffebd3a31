package pool

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassTable(t *testing.T) {
	for c := 1; c < numClasses; c++ {
		require.Greater(t, classSizes[c], classSizes[c-1], "class sizes must grow: class %d", c)
	}
	assert.Equal(t, int64(smallStep), classSizes[0])
	assert.Equal(t, int64(smallMax), classSizes[numSmall-1])
	assert.Equal(t, int64(mediumMax), classSizes[numSmall+numMedium-1])
	assert.Equal(t, int64(largeMax), classSizes[numClasses-1])
}

func TestClassOf(t *testing.T) {
	cases := []struct {
		n     int64
		class int
		size  int64
	}{
		{1, 0, 512},
		{512, 0, 512},
		{513, 1, 1024},
		{4096, 7, 4096},
		{64 << 10, 127, 64 << 10},
		{64<<10 + 1, 128, 72 << 10},
		{128 << 10, 135, 128 << 10},
		{1 << 20, 159, 1 << 20},
		{1<<20 + 1, 160, 1<<20 + 256<<10},
		{3 << 20, 165, 3 << 20},
		{64 << 30, numClasses - 1, 64 << 30},
		{64<<30 + 1, hugeClass, 64<<30 + 2<<20},
		{100 << 30, hugeClass, 100 << 30},
	}
	for _, tc := range cases {
		c, size, ok := classOf(tc.n)
		require.True(t, ok)
		assert.Equal(t, tc.class, c, "class of %d", tc.n)
		assert.Equal(t, tc.size, size, "size of %d", tc.n)
	}
	_, size, ok := classOf(maxRequest)
	assert.True(t, ok)
	assert.Equal(t, int64(maxRequest), size)
	for _, n := range []int64{maxRequest + 1, math.MaxInt64} {
		_, _, ok = classOf(n)
		assert.False(t, ok, "classOf(%d)", n)
	}
}

// FuzzClassOf checks, for any request size, that the block fits the request,
// that a class's block is its table size, and that rounding wastes what the
// package doc's table says: under 512 bytes for small requests, under a
// ninth of the block up to 1 MiB and under a fifth above.
func FuzzClassOf(f *testing.F) {
	for _, n := range []int64{1, 511, 512, 513, 65535, 65537, 1<<20 + 1, 5 << 30, 64<<30 + 1, math.MaxInt64 - 1} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		if n <= 0 {
			return
		}
		c, size, ok := classOf(n)
		if !ok {
			if n <= maxRequest {
				t.Fatalf("classOf(%d) refused a size below maxRequest", n)
			}
			return
		}
		if size < n {
			t.Fatalf("classOf(%d) = size %d, smaller than the request", n, size)
		}
		switch {
		case c == hugeClass:
			if n <= largeMax || size%hugeStep != 0 || size-n >= hugeStep {
				t.Fatalf("classOf(%d) = huge %d", n, size)
			}
		case c < 0 || c >= numClasses:
			t.Fatalf("classOf(%d) = class %d out of range", n, c)
		default:
			if classSizes[c] != size {
				t.Fatalf("classOf(%d) = class %d size %d, table says %d", n, c, size, classSizes[c])
			}
			if c > 0 && classSizes[c-1] >= n {
				t.Fatalf("classOf(%d) = class %d, but class %d (%d) fits", n, c, c-1, classSizes[c-1])
			}
			if n <= smallMax && size-n >= smallStep {
				t.Fatalf("classOf(%d) wastes %d bytes", n, size-n)
			}
			if n > smallMax && n <= mediumMax && (size-n)*9 >= size {
				t.Fatalf("classOf(%d) wastes %d of %d bytes, a ninth or more", n, size-n, size)
			}
			if n > mediumMax && (size-n)*5 >= size {
				t.Fatalf("classOf(%d) wastes %d of %d bytes, a fifth or more", n, size-n, size)
			}
		}
	})
}
