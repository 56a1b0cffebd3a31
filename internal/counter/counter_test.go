package counter_test

import (
	"fmt"
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
