package cacheline_test

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/cacheline"
)

// A striped counter keeps each stripe on a line of its own, so goroutines
// counting on different stripes never invalidate each other's lines.
func Example() {
	type stripe struct {
		n atomic.Int64
		_ [cacheline.Size - unsafe.Sizeof(atomic.Int64{})]byte
	}
	var stripes [4]stripe
	stripes[1].n.Add(1)
	fmt.Println(unsafe.Sizeof(stripe{}), unsafe.Sizeof(stripes))
	// Output:
	// 64 256
}
