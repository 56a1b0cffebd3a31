package counter_test

import (
	"fmt"
	"math"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/counter"
)

func TestRaisePeakKeepsTheHighest(t *testing.T) {
	var p atomic.Int64
	counter.RaisePeak(&p, 5)
	counter.RaisePeak(&p, 3)
	assert.EqualValues(t, 5, p.Load(), "a lower value leaves the peak")
	counter.RaisePeak(&p, -1)
	assert.EqualValues(t, 5, p.Load())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				counter.RaisePeak(&p, int64(g*1000+i))
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 7999, p.Load(), "concurrent raises leave the highest value")
}

func TestNewAllocatorIDIsUnique(t *testing.T) {
	seen := map[uint32]bool{}
	for range 1000 {
		id := counter.NewAllocatorID()
		assert.False(t, seen[id], "id %d handed out twice", id)
		assert.NotZero(t, id)
		seen[id] = true
	}
}

// A striped counter keeps each stripe on a line of its own, so goroutines
// counting on different stripes never invalidate each other's lines.
func Example() {
	type stripe struct {
		n atomic.Int64
		_ [counter.CacheLine - unsafe.Sizeof(atomic.Int64{})]byte
	}
	var stripes [4]stripe
	stripes[1].n.Add(1)
	fmt.Println(unsafe.Sizeof(stripe{}), unsafe.Sizeof(stripes))
	// Output:
	// 64 256
}

// A peak only ever rises: a lower value leaves it where it was.
func ExampleRaisePeak() {
	var high atomic.Int64
	for _, v := range []int64{3, 7, 5} {
		counter.RaisePeak(&high, v)
	}
	fmt.Println(high.Load())
	// Output: 7
}

func TestAddSatHoldsAtTheBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b int64
		want int64
	}{
		{"small", 2, 3, 5},
		{"past the top", math.MaxInt64 - 1, 2, math.MaxInt64},
		{"two halves", 1 << 62, 1 << 62, math.MaxInt64},
		{"past the bottom", math.MinInt64 + 1, -2, math.MinInt64},
		{"back down", math.MaxInt64, -1, math.MaxInt64 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, counter.AddSat(tc.a, tc.b))
		})
	}
}

func TestTotalIsExactPastTheRange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		adds  []int64
		after int64 // the saturated reading after every add
	}{
		{"in range", []int64{5, -3}, 2},
		{"two adoptions of 2^62", []int64{1 << 62, 1 << 62}, math.MaxInt64},
		{"past and back", []int64{1 << 62, 1 << 62, 1 << 62, -(1 << 62), -(1 << 62)}, 1 << 62},
		{"four of MaxInt64 and back to 1", []int64{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64,
			-math.MaxInt64, -math.MaxInt64, -math.MaxInt64, -math.MaxInt64 + 1}, 1},
		{"below the bottom", []int64{math.MinInt64, -1}, math.MinInt64},
		{"below and back", []int64{math.MinInt64, -5, 5}, math.MinInt64},
		{"to zero", []int64{1 << 62, 1 << 62, -(1 << 62), -(1 << 62)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tot counter.Total
			var got int64
			for _, n := range tc.adds {
				got = tot.Add(n)
			}
			assert.Equal(t, tc.after, got)
			assert.Equal(t, tc.after, tot.Load())
		})
	}
}

// AddMul and AddSum are exact in 128 bits whatever the signs: checked
// against math/big over products near the int64 bounds, and Load holds the
// result at them.
func TestSumAddMulAndAddSumAreExact(t *testing.T) {
	vals := []int64{0, 1, -1, 2, 1 << 32, -(1 << 32), math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, 12345}
	clamp := func(b *big.Int) int64 {
		switch {
		case b.Cmp(big.NewInt(math.MaxInt64)) > 0:
			return math.MaxInt64
		case b.Cmp(big.NewInt(math.MinInt64)) < 0:
			return math.MinInt64
		}
		return b.Int64()
	}
	for _, start := range vals {
		for _, n := range vals {
			for _, size := range vals {
				var s counter.Sum
				s.Add(start)
				s.AddMul(n, size)
				want := new(big.Int).Mul(big.NewInt(n), big.NewInt(size))
				want.Add(want, big.NewInt(start))
				assert.Equal(t, clamp(want), s.Load(), "%d + %d × %d", start, n, size)

				// Taking the product back off leaves start: nothing wrapped.
				var neg counter.Sum
				neg.AddSum(s)
				if n != math.MinInt64 {
					neg.AddMul(-n, size)
					assert.Equal(t, start, neg.Load(), "%d + %d × %d − %d × %d", start, n, size, n, size)
				}
			}
		}
	}
	var five, one counter.Sum
	one.Add(math.MaxInt64)
	for range 5 {
		five.AddMul(1, math.MaxInt64)
	}
	four := five
	four.SubSum(one)
	four.SubSum(one)
	four.SubSum(one)
	assert.EqualValues(t, math.MaxInt64, four.Load(), "two near MaxInt64 saturate too")
	four.SubSum(one)
	assert.EqualValues(t, math.MaxInt64, four.Load(), "one is MaxInt64 exactly")
	four.AddSum(one)
	four.SubSum(five)
	assert.EqualValues(t, math.MinInt64, four.Load(), "below the bounds, held at MinInt64")
	assert.EqualValues(t, math.MaxInt64, five.Load(), "five records near MaxInt64 saturate")
	for range 5 {
		five.AddMul(-1, math.MaxInt64)
	}
	assert.Zero(t, five.Load(), "and come back to 0 when released")
}
